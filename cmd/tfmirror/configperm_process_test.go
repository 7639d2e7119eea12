package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
	bin := buildBinary(t)
	const script = `set -e
mount -t tmpfs -o size=1m tmpfs "$DIR"
mkdir "$DIR/..2026_11_28_20_00_00.1"
printf 'log_level = "debug"\n' > "$DIR/..2026_11_28_20_00_00.1/tfmirror.hcl"
chmod 0666 "$DIR/..2026_11_28_20_00_00.1/tfmirror.hcl"
ln -s ..2026_11_28_20_00_00.1 "$DIR/..data"
ln -s ..data/tfmirror.hcl "$DIR/tfmirror.hcl"
if [ "$RO" = 1 ]; then mount -o remount,ro "$DIR"; fi
exec "$BIN" config check "$DIR/tfmirror.hcl"
`
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
			dir := filepath.Join(t.TempDir(), "config")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			ro := "0"
			if tc.readOnly {
				ro = "1"
			}
			cmd := exec.Command(unshare, "--mount", "--map-root-user", "sh", "-c", script)
			cmd.Env = []string{"DIR=" + dir, "RO=" + ro, "BIN=" + bin, "PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || !strings.Contains(string(out), tc.want) || tc.readOnly && !settingShown(string(out), "log_level", "debug") {
				t.Errorf("exit %d, want %d and %q:\n%s", code, tc.code, tc.want, out)
			}
		})
	}
}
