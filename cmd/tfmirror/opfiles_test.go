//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/airgap"
	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// operatorFileFlags are serve's flags that name a file the operator
// hands the mirror, with what else serve needs to read it (a flag
// naming a file that serve reads first is given a good file in dir),
// and whether the file carries a secret or says what is trusted, so that
// one others may write is refused.
var operatorFileFlags = []struct {
	flag    string
	args    func(dir string) []string
	trusted bool
	hcl     bool // read by internal/hclfile, which bounds it itself
}{
	{"auth-tokens-file", nil, true, false},
	{"url-signing-key-file", func(d string) []string {
		return []string{"--auth-tokens-file", goodFile(d, "tokens", strings.Repeat("t", 32)+"\n")}
	}, true, false},
	{"tls-cert", func(d string) []string { return []string{"--tls-key", goodFile(d, "key.pem", "key")} }, false, false},
	{"tls-key", func(d string) []string { return []string{"--tls-cert", goodFile(d, "cert.pem", "cert")} }, true, false},
	{"origin-ca-file", nil, true, false},
	{"credentials-file", nil, true, true},
	{"module-source-credentials", nil, true, true},
	{"releases-hashicorp-keys", nil, true, false},
	{"releases-opentofu-keys", nil, true, false},
	{"shared-store-key-file", func(string) []string {
		return []string{"--shared-store", "s3://bucket?endpoint=http://127.0.0.1:1&region=us-east-1&path_style=true"}
	}, true, false},
	{"shared-store-previous-key-file", func(d string) []string {
		return []string{"--shared-store", "s3://bucket?endpoint=http://127.0.0.1:1&region=us-east-1&path_style=true",
			"--shared-store-key-file", goodFile(d, "shared.key", strings.Repeat("k", 32))}
	}, true, false},
	{"export-key", nil, true, false},
	{"trusted-export-keys", nil, true, false},
	{"trusted-publisher-keys", nil, true, false},
}

// TestOperatorFilesRefusedProcess runs the binary with each file serve's
// flags name in turn replaced by what it must refuse at start, at once
// and naming the file: a FIFO (whose open would wait for a writer for
// ever), a file larger than what is read of such a file (17 MiB, past
// every bound), and, for the files of secrets and trust, one that all
// users may write, with the chmod that makes it its owner's, and (as
// root) one of mode 0600 owned by another user, with the chown.
func TestOperatorFilesRefusedProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	type refusal struct {
		kind string
		make func(t *testing.T, path string)
		want func(path string) string
	}
	fifo := refusal{"FIFO", func(t *testing.T, path string) {
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			t.Fatal(err)
		}
	}, func(p string) string { return p + " is a FIFO, not a regular file" }}
	large := refusal{"large", func(t *testing.T, path string) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			err = f.Truncate(17 << 20) // sparse
			f.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
	}, func(p string) string { return p + " is larger than " }}
	writable := refusal{"writable", func(t *testing.T, path string) {
		goodFile(filepath.Dir(path), filepath.Base(path), "whatever")
		if err := os.Chmod(path, 0o666); err != nil {
			t.Fatal(err)
		}
	}, func(p string) string { return p + " has mode 0666" }}
	owned := refusal{"owner", func(t *testing.T, path string) {
		goodFile(filepath.Dir(path), filepath.Base(path), "whatever")
		if err := os.Chown(path, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}, func(p string) string {
		return p + " is owned by user 65534, neither root nor the user the mirror runs as"
	}}
	asRoot := os.Geteuid() == 0
	if !asRoot {
		t.Log("not root: files of another user are not tried")
	}
	for _, ff := range operatorFileFlags {
		refusals := []refusal{fifo}
		if !ff.hcl {
			refusals = append(refusals, large)
		}
		if ff.trusted {
			refusals = append(refusals, writable)
			if asRoot {
				refusals = append(refusals, owned)
			}
		}
		for _, r := range refusals {
			t.Run(ff.flag+"/"+r.kind, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				file := filepath.Join(dir, "operator-file")
				r.make(t, file)
				value := file
				if ff.flag == "trusted-publisher-keys" {
					value = "registry.terraform.io/hashicorp=" + file
				}
				args := []string{"serve", "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--" + ff.flag, value}
				if !strings.HasPrefix(ff.flag, "tls-") {
					args = append(args, "--insecure-http")
				}
				if ff.args != nil {
					args = append(args, ff.args(dir)...)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, bin, args...)
				cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "AWS_ACCESS_KEY_ID=x", "AWS_SECRET_ACCESS_KEY=x"}
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				start := time.Now()
				err := cmd.Run()
				took := time.Since(start)
				if ctx.Err() != nil {
					t.Fatalf("still running after %v, killed\n%s", took, out.String())
				}
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 1 {
					t.Fatalf("%v, want exit 1\n%s", err, out.String())
				}
				if want := r.want(file); !strings.Contains(out.String(), want) {
					t.Errorf("the error does not say %q:\n%s", want, out.String())
				}
				if r.kind == "writable" && !strings.Contains(out.String(), "chmod go-w "+file) {
					t.Errorf("the error does not give the chmod to run:\n%s", out.String())
				}
				if r.kind == "owner" && !strings.Contains(out.String(), "chown root "+file) {
					t.Errorf("the error does not give the chown to run:\n%s", out.String())
				}
			})
		}
	}
}

// TestKeyFileModeProcess runs export-key on an export key laid out as a
// Kubernetes Secret volume lays it out (the name a link to ..data/NAME,
// ..data a link to a dated directory) with mode 0666, in a mount
// namespace of its own: on a read-only mount, as the kubelet mounts a
// Secret, nobody can write it and it is read; on a mount others can
// write through, it is refused with the chmod to run.
func TestKeyFileModeProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	unshare := mountNamespace(t)
	bin := buildBinary(t)
	k, err := airgap.GenerateExportKey("tfmirror test export key")
	if err != nil {
		t.Fatal(err)
	}
	var key bytes.Buffer
	if err := k.WritePrivate(&key); err != nil {
		t.Fatal(err)
	}
	keyFile := goodFile(t.TempDir(), "export.key", key.String())
	for _, tc := range []struct {
		name     string
		readOnly bool
		code     int
		want     string
	}{
		{"read-only mount", true, 0, "-----BEGIN PGP PUBLIC KEY BLOCK-----"},
		{"writable mount", false, 1, "/export.key has mode 0666: users of its group or all users may change what the mirror serves and trusts, so it is not read; make it writable by its owner only: chmod go-w "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, out := runOnMountedVolume(t, unshare, keyFile, tc.readOnly,
				bin, "export-key", "--data-dir", filepath.Join(t.TempDir(), "data"), "--export-key", "$FILE")
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, want %d and %q:\n%s", code, tc.code, tc.want, out)
			}
		})
	}
}

// TestDataDirKeyChecked: the URL-signing key tfmirror generates in the
// data directory is read as the operator's key files are. The one it
// wrote (mode 0600, as every release wrote it) is read as it is, so
// data directories of earlier releases keep their key and the signed
// URLs in flight; one of its own that its group or all users may write
// (a kubelet's fsGroup walk gives files 0660 at every mount) is made its
// owner's only, logged, and read, the same key; one of another user
// (neither root nor the process's), whatever its mode, is refused naming
// it and its owner, with the chown to run, and kept, not replaced by a
// new key; a FIFO in its place is refused at once, and
// a file past the bound too.
func TestDataDirKeyChecked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, signingKeyName)
	key := bytes.Repeat([]byte("k"), 32)
	if err := os.WriteFile(path, key, 0o600); err != nil {
		t.Fatal(err)
	}
	discard := slog.New(slog.DiscardHandler)
	if got, err := dataDirKey(path, discard); err != nil || !bytes.Equal(got, key) {
		t.Fatalf("the key of mode 0600: %q, %v", got, err)
	}
	for _, mode := range []os.FileMode{0o660, 0o606, 0o666} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		var logged bytes.Buffer
		got, err := dataDirKey(path, slog.New(slog.NewTextHandler(&logged, nil)))
		if err != nil || !bytes.Equal(got, key) {
			t.Errorf("its own key of mode %04o: %q, %v; want it read", mode, got, err)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != mode&^0o022 {
			t.Errorf("its own key of mode %04o is now %v (%v), want %04o", mode, fi.Mode().Perm(), err, mode&^0o022)
		}
		if want := fmt.Sprintf("path=%s mode=%04o now=%04o", path, mode, mode&^0o022); !strings.Contains(logged.String(), want) {
			t.Errorf("its own key of mode %04o: logged %q, want %q", mode, logged.String(), want)
		}
	}

	if os.Geteuid() == 0 {
		// Another user's key, which this process may not take as its
		// own, and which that user may change whatever its mode.
		if err := os.Chown(path, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		for _, mode := range []os.FileMode{0o660, 0o606, 0o600, 0o640} {
			if err := os.Chmod(path, mode); err != nil {
				t.Fatal(err)
			}
			_, err := dataDirKey(path, discard)
			var oe *inputfile.OwnerError
			if !errors.As(err, &oe) {
				t.Fatalf("another user's key of mode %04o: %v, want an *inputfile.OwnerError", mode, err)
			}
			want := []string{"URL-signing key generated in the data directory", path + " is owned by user 65534", "chown root " + path}
			if mode&0o022 != 0 {
				want = append(want, fmt.Sprintf("chmod go-w %s (it has mode %04o)", path, mode))
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("another user's key of mode %04o: %v, want it refused saying %q", mode, err, w)
				}
			}
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != mode {
				t.Errorf("another user's key of mode %04o was changed: %v (%v)", mode, fi.Mode(), err)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, key) {
				t.Errorf("mode %04o: the refused key was replaced", mode)
			}
		}
		// Root's, as a data directory first served by root leaves it.
		if err := os.Chown(path, 0, 0); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Log("not root: another user's key is not tried")
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if got, err := dataDirKey(path, discard); err != nil || !bytes.Equal(got, key) {
		t.Errorf("the key of mode 0640 (its group reads it): %q, %v", got, err)
	}

	fifo := filepath.Join(t.TempDir(), signingKeyName)
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := dataDirKey(fifo, slog.New(slog.DiscardHandler)); done <- err }()
	select {
	case err := <-done:
		var ke *inputfile.KindError
		if !errors.As(err, &ke) {
			t.Errorf("a FIFO in place of the key: %v, want it refused", err)
		}
	case <-time.After(time.Minute): // a refusal takes milliseconds; a wait on the FIFO never ends
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		<-done
		t.Fatal("reading the key waited on a FIFO")
	}

	large := filepath.Join(t.TempDir(), signingKeyName)
	if err := os.WriteFile(large, bytes.Repeat([]byte("k"), maxDataDirKeyBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	var tl *inputfile.TooLargeError
	if _, err := dataDirKey(large, slog.New(slog.DiscardHandler)); !errors.As(err, &tl) || tl.Max != maxDataDirKeyBytes {
		t.Errorf("a key of %d bytes: %v, want it refused naming the bound", maxDataDirKeyBytes+1, err)
	}
}

// TestDataDirGeneratedTLSKeyProcess: the TLS key tfmirror generated in
// its data directory (DATA-DIR/tls/server-key.pem, without --tls-key),
// and the key of the CA that issued it (tls/ca-key.pem),
// that a kubelet's fsGroup walk (at each mount with fsGroupChangePolicy
// Always) or a restore left group-writable is made its owner's only and
// logged, as the URL-signing key is, and the serve starts with the same
// CA and key: a data directory release 2.0.0 served (which read the key
// whatever its mode) is refused at no start. An --tls-key of the
// operator's is still refused (TestOperatorFilesRefusedProcess).
func TestDataDirGeneratedTLSKeyProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	run := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0")
		cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
		out, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout = io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			text.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "tfmirror is serving") {
				cmd.Process.Kill()
				break
			}
		}
		io.Copy(io.Discard, out)
		cmd.Wait()
		return text.String()
	}
	if logged := run(); !strings.Contains(logged, "tfmirror is serving") {
		t.Fatalf("the first serve did not start:\n%s", logged)
	}
	tlsDir := filepath.Join(dataDir, "tls")
	key := filepath.Join(tlsDir, "server-key.pem")
	before := map[string][]byte{}
	for _, name := range []string{"ca.pem", "ca-key.pem", "server.pem", "server-key.pem"} {
		b, err := os.ReadFile(filepath.Join(tlsDir, name))
		if err != nil {
			t.Fatal(err)
		}
		before[name] = b
		if err := os.Chmod(filepath.Join(tlsDir, name), 0o660); err != nil {
			t.Fatal(err)
		}
	}

	logged := run()
	if !strings.Contains(logged, "tfmirror is serving") {
		t.Fatalf("serve on its own generated TLS key of mode 0660 did not start:\n%s", logged)
	}
	if !strings.Contains(logged, "a file of the data directory was writable by other users; it is now its owner's only") {
		t.Errorf("the serve did not say it made its key its own:\n%s", logged)
	}
	for _, k := range []string{key, filepath.Join(tlsDir, "ca-key.pem")} {
		if fi, err := os.Stat(k); err != nil || fi.Mode().Perm() != 0o640 {
			t.Errorf("%s is now %v (%v), want 0640", k, fi.Mode(), err)
		}
	}
	for name, b := range before {
		if got, _ := os.ReadFile(filepath.Join(tlsDir, name)); !bytes.Equal(got, b) {
			t.Errorf("%s was replaced: clients trust the CA and key they had", name)
		}
	}
}

// TestDataDirKeyProcess: a serve with client authentication whose data
// directory's URL-signing key its group may write (as a kubelet's
// fsGroup walk leaves it at every mount) takes the group's write bit
// from its own key, says so, and serves with the same key; as root, a
// key of another user stops the start, naming the key, its owner and the
// chown and chmod to run, and is left as it was.
func TestDataDirKeyProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	if err := os.Mkdir(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	key := goodFile(dataDir, signingKeyName, strings.Repeat("k", 32))
	if err := os.Chmod(key, 0o660); err != nil {
		t.Fatal(err)
	}
	args := []string{"serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--insecure-http",
		"--auth-tokens-file", goodFile(dir, "tokens", strings.Repeat("t", 32)+"\n")}
	run := func(until string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
		out, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout = io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			text.WriteString(sc.Text() + "\n")
			if until != "" && strings.Contains(sc.Text(), until) {
				cmd.Process.Kill()
				break
			}
		}
		io.Copy(io.Discard, out)
		return text.String(), cmd.Wait()
	}

	logged, _ := run("tfmirror is serving")
	if !strings.Contains(logged, "a file of the data directory was writable by other users; it is now its owner's only") ||
		!strings.Contains(logged, "tfmirror is serving") {
		t.Fatalf("serve on its own key of mode 0660 did not say it made it its own and start:\n%s", logged)
	}
	if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("the key is now %v (%v), want 0640", fi.Mode(), err)
	}
	if got, _ := os.ReadFile(key); string(got) != strings.Repeat("k", 32) {
		t.Error("the key was replaced")
	}

	if os.Geteuid() != 0 {
		t.Log("not root: another user's key is not tried")
		return
	}
	if err := os.Chown(key, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(key, 0o660); err != nil {
		t.Fatal(err)
	}
	logged, err := run("")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("%v, want exit 1\n%s", err, logged)
	}
	for _, want := range []string{"URL-signing key generated in the data directory (no --url-signing-key-file): " + key + " is owned by user 65534", "chown root " + key, "chmod go-w " + key + " (it has mode 0660)"} {
		if !strings.Contains(logged, want) {
			t.Errorf("the error does not say %q:\n%s", want, logged)
		}
	}
	if got, _ := os.ReadFile(key); string(got) != strings.Repeat("k", 32) {
		t.Error("the refused key was replaced")
	}
}

// TestPinsFileOthersMayWriteProcess: serve starts with a pins directory
// one of whose files its group may write: it serves, logs the refusal
// naming the file and the chmod to run, and the status page shows it
// (retention.pins_error), as for any pins file it cannot read.
func TestPinsFileOthersMayWriteProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	origin := newOrigin(t, fakeorigin.Options{})
	pins := t.TempDir()
	file := goodFile(pins, "team.hcl", "provider \"registry.terraform.io/hashicorp/random\" {\n  versions = [\"3.6.0\"]\n}\n")
	if err := os.Chmod(file, 0o664); err != nil {
		t.Fatal(err)
	}
	m := startProcess(t, bin, filepath.Join(t.TempDir(), "data"), origin, originCAFile(t, origin), "--pins-dir", pins)
	want := "pins: " + file + " has mode 0664: users of its group or all users may change what the mirror serves and trusts, so it is not read; make it writable by its owner only: chmod go-w " + file
	logged := m.waitLog("reading the pins; the pins read before are kept", 30*time.Second)
	if e, _ := logged["error"].(string); !strings.Contains(e, want) {
		t.Errorf("the log says %q, want %q", e, want)
	}
	st := m.status(t)
	if !strings.Contains(st.Retention.PinsError, want) {
		t.Errorf("the status page's pins error %q, want %q", st.Retention.PinsError, want)
	}
	stopProcess(t, m, syscall.SIGTERM)
}
