//go:build unix

package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConfigFileModeProcess runs config check on a configuration file
// laid out as a Kubernetes ConfigMap volume lays it out (the name a link
// to ..data/NAME, ..data a link to a dated directory) with mode 0666, in
// a mount namespace of its own: on a read-only mount, as the kubelet
// mounts a ConfigMap, nobody can write it and it is read; on a mount
// others can write through, it is refused with the chmod to run.
func TestConfigFileModeProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	unshare := mountNamespace(t)
	bin := buildBinary(t)
	conf := goodFile(t.TempDir(), "tfmirror.hcl", "log_level = \"debug\"\n")
	for _, tc := range []struct {
		name     string
		readOnly bool
		code     int
		want     string
	}{
		{"read-only mount", true, 0, ": valid\n"},
		{"writable mount", false, 1, "mode 0666: users of its group or all users may change what the mirror serves and trusts, so it is not read; make it writable by its owner only: chmod go-w "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, out := runOnMountedVolume(t, unshare, conf, tc.readOnly, bin, "config", "check", "$FILE")
			if code != tc.code || !strings.Contains(out, tc.want) || tc.readOnly && !settingShown(out, "log_level", "debug") {
				t.Errorf("exit %d, want %d and %q:\n%s", code, tc.code, tc.want, out)
			}
		})
	}
}

// TestConfigFileOwnerProcess: as root, config check and serve refuse a
// configuration file of mode 0644 owned by another user (who may change
// it whatever its mode), naming the file, its owner and the chown to
// run: config check exits 1, serve 2 (as for any configuration file it
// refuses) without starting; given to root, it is valid.
func TestConfigFileOwnerProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	if os.Geteuid() != 0 {
		t.Log("not root: a file of another user is not tried")
		return
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	conf := goodFile(dir, "tfmirror.hcl", "log_level = \"debug\"\n")
	if err := os.Chmod(conf, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(conf, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
		out, err := cmd.CombinedOutput()
		if ctx.Err() != nil {
			t.Fatalf("%v: still running, killed\n%s", args, out)
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	want := []string{"Configuration file owned by another user", conf + " is owned by user 65534, neither root nor the user the mirror runs as (0)", "chown root " + conf}
	for _, tc := range []struct {
		code int
		args []string
	}{
		{1, []string{"config", "check", conf}},
		{2, []string{"serve", "--config", conf, "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--insecure-http"}},
	} {
		args := tc.args
		code, out := run(args...)
		if code != tc.code || strings.Contains(out, "tfmirror is serving") {
			t.Errorf("%v: exit %d, want %d\n%s", args[0], code, tc.code, out)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: the error does not say %q:\n%s", args[0], w, out)
			}
		}
	}
	if err := os.Chown(conf, 0, 0); err != nil {
		t.Fatal(err)
	}
	if code, out := run("config", "check", conf); code != 0 || !strings.Contains(out, ": valid\n") {
		t.Errorf("root's: exit %d, want 0\n%s", code, out)
	}
}

// mountNamespace returns the unshare command that gives a test a mount
// namespace of its own (util-linux, user namespaces); without one the
// test skips, and fails in CI.
func mountNamespace(t *testing.T) string {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err == nil {
		err = exec.Command(unshare, "--mount", "--map-root-user", "true").Run()
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("unshare --mount --map-root-user (util-linux, user namespaces): %v", err)
		}
		t.Skipf("no mount namespace: %v", err)
	}
	return unshare
}

// runOnMountedVolume copies src, with mode 0666, into a volume laid out
// as the kubelet lays out a ConfigMap or Secret (the name a link to
// ..data/NAME, ..data a link to a dated directory) on a tmpfs of a mount
// namespace of its own, remounted read-only when readOnly, and runs
// command there with $FILE in its arguments standing for the file's path
// through the volume's link. It returns the exit code and the output.
func runOnMountedVolume(t *testing.T, unshare, src string, readOnly bool, command ...string) (int, string) {
	t.Helper()
	const script = `set -e
mount -t tmpfs -o size=1m tmpfs "$DIR"
mkdir "$DIR/..2026_11_28_20_00_00.1"
cp "$SRC" "$DIR/..2026_11_28_20_00_00.1/$NAME"
chmod 0666 "$DIR/..2026_11_28_20_00_00.1/$NAME"
ln -s ..2026_11_28_20_00_00.1 "$DIR/..data"
ln -s "..data/$NAME" "$DIR/$NAME"
if [ "$RO" = 1 ]; then mount -o remount,ro "$DIR"; fi
exec "$@"
`
	dir := filepath.Join(t.TempDir(), "volume")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ro := "0"
	if readOnly {
		ro = "1"
	}
	args := []string{"--mount", "--map-root-user", "sh", "-c", script, "sh"}
	for _, a := range command {
		args = append(args, strings.ReplaceAll(a, "$FILE", filepath.Join(dir, filepath.Base(src))))
	}
	cmd := exec.Command(unshare, args...)
	cmd.Env = []string{"DIR=" + dir, "RO=" + ro, "SRC=" + src, "NAME=" + filepath.Base(src), "PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}
