//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/hclfile"
)

// TestOperatorFIFOsRefusedProcess runs the binary with a FIFO in place of
// each operator's file that internal/hclfile reads, whose open would wait
// for a writer for ever: serve's origin credentials file and module source
// credentials (read at start), a sync manifest, a Terraform configuration's
// .tf file, and /dev/stdin given as a manifest while standard input is a
// pipe nobody writes to. Each command exits at once with its error status,
// naming the file and saying what it is; sync says how to read a manifest
// from standard input.
func TestOperatorFIFOsRefusedProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	for _, tc := range []struct {
		name string
		file string // the FIFO's name in its directory
		args func(file, data string) []string
		code int
		hint bool
	}{
		{"serve credentials file", "credentials.tfrc", func(f, d string) []string {
			return []string{"serve", "--data-dir", d, "--listen", "127.0.0.1:0", "--insecure-http", "--credentials-file", f}
		}, 1, false},
		{"serve module source credentials", "module-creds.hcl", func(f, d string) []string {
			return []string{"serve", "--data-dir", d, "--listen", "127.0.0.1:0", "--insecure-http", "--module-source-credentials", f}
		}, 1, false},
		{"sync manifest", "mirror.hcl", func(f, d string) []string { return []string{"sync", "--data-dir", d, "--dry-run", f} }, 2, true},
		{"sync configuration", "main.tf", func(f, d string) []string {
			return []string{"sync", "--data-dir", d, "--dry-run", filepath.Dir(f)}
		}, 2, true},
		{"sync /dev/stdin", "", func(_, d string) []string { return []string{"sync", "--data-dir", d, "--dry-run", "/dev/stdin"} }, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			file := "/dev/stdin"
			if tc.file != "" {
				file = filepath.Join(t.TempDir(), tc.file)
				if err := syscall.Mkfifo(file, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			// Standard input: a pipe nobody writes to, for ever.
			stdin, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			defer w.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, tc.args(file, filepath.Join(t.TempDir(), "data"))...)
			cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
			cmd.Stdin = stdin
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			start := time.Now()
			err = cmd.Run()
			took := time.Since(start)
			var ee *exec.ExitError
			if ctx.Err() != nil {
				t.Fatalf("still running after %v, killed: it waits on the FIFO\n%s", took, out.String())
			}
			if !errors.As(err, &ee) || ee.ExitCode() != tc.code {
				t.Fatalf("%v, want exit %d\n%s", err, tc.code, out.String())
			}
			if !strings.Contains(out.String(), "is a FIFO, not a regular file") || (tc.file != "" && !strings.Contains(out.String(), file)) {
				t.Errorf("the error does not name %s as a FIFO:\n%s", file, out.String())
			}
			if tc.hint && !strings.Contains(out.String(), `name it "-"`) {
				t.Errorf("sync does not say how to read a manifest from standard input:\n%s", out.String())
			}
			t.Logf("exit %d after %v:\n%s", ee.ExitCode(), took, out.String())
		})
	}
}

// syncWithStdin runs `tfmirror sync` in this process with stdin as its
// standard input, and returns its stdout, stderr and exit status.
func syncWithStdin(t *testing.T, ctx context.Context, stdin io.Reader, args ...string) (string, string, int) {
	t.Helper()
	origin := syncOrigin(t)
	var stdout, stderr bytes.Buffer
	code := runSync(ctx, append([]string{
		"--data-dir", filepath.Join(t.TempDir(), "data"),
		"--allowed-origins", tfRegistry,
		"--allow-private-origins",
	}, args...), func(string) (string, bool) { return "", false }, &stdout, &stderr, overrides{
		rootCAs:     origin.CertPool(),
		dialContext: routeRegistryTo(origin),
		keepStdLog:  true,
		stdin:       stdin,
	})
	t.Logf("tfmirror sync %v: exit %d\nstdout:\n%sstderr:\n%s", args, code, stdout.String(), stderr.String())
	return stdout.String(), stderr.String(), code
}

// `tfmirror sync -` reads a sync manifest from standard input, the one
// stream sync reads that is no regular file, and only when its operator
// names it: with another manifest, and read no further than a file may be
// long (an endless stream is refused as too large), once (- given twice is
// refused), and an interrupt while nothing comes ends the sync.
func TestSyncReadsManifestFromStdin(t *testing.T) {
	t.Parallel()
	body, err := os.ReadFile(syncManifest(t, tfRegistry, ""))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("manifest", func(t *testing.T) {
		t.Parallel()
		stdout, _, code := syncWithStdin(t, context.Background(), bytes.NewReader(body), "--dry-run", "-")
		if code != 0 || strings.Count(stdout, "would fetch ") != 9 {
			t.Errorf("exit %d, want 0 and the 9 packages of the manifest listed", code)
		}
	})
	t.Run("syntax error", func(t *testing.T) {
		t.Parallel()
		_, stderr, code := syncWithStdin(t, context.Background(), strings.NewReader("provider {\n"), "--dry-run", "-")
		if code != 2 || !strings.Contains(stderr, "(standard input):1") {
			t.Errorf("exit %d, want 2 and the error at (standard input):1", code)
		}
	})
	t.Run("endless", func(t *testing.T) {
		t.Parallel()
		endless := io.MultiReader(strings.NewReader("# "), spaces{})
		_, stderr, code := syncWithStdin(t, context.Background(), endless, "--dry-run", "-")
		if code != 2 || !strings.Contains(stderr, "File too large") || !strings.Contains(stderr, "16777216 bytes") {
			t.Errorf("exit %d, want 2 and the stream refused as larger than %d bytes", code, hclfile.MaxBytes)
		}
	})
	t.Run("twice", func(t *testing.T) {
		t.Parallel()
		_, stderr, code := syncWithStdin(t, context.Background(), bytes.NewReader(body), "--dry-run", "-", "-")
		if code != 2 || !strings.Contains(stderr, "given 2 times") {
			t.Errorf("exit %d, want 2 and - refused when given twice", code)
		}
	})
	t.Run("interrupted", func(t *testing.T) {
		t.Parallel()
		r, w := io.Pipe()
		defer w.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		done := make(chan int, 1)
		go func() {
			_, _, code := syncWithStdin(t, ctx, r, "--dry-run", "-")
			done <- code
		}()
		select {
		case code := <-done:
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("sync still waiting on standard input 30 s after it was interrupted")
		}
	})
}

// spaces is an endless stream of spaces.
type spaces struct{}

func (spaces) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

// A module source credential's *_file is opened as the file naming it
// is: a FIFO (whose open waits for a writer) and a device (which never
// ends) are refused at once, naming them, and a link to a regular file
// (a mounted Secret's) is read.
func TestModuleSourceSecretFileRefusesWhatIsNoRegularFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "git-password")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "linked")
	if err := os.Symlink(writeTestFile(t, "secret", "s3cr3t\n"), link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ secret, want string }{
		{fifo, fifo + " is a FIFO, not a regular file"},
		{"/dev/zero", "/dev/zero is a device, not a regular file"},
		{link, ""},
	} {
		creds := writeTestFile(t, "creds.hcl", `source_host "git.example.com" {
  origins       = ["registry.example.com"]
  username      = "bot"
  password_file = "`+tc.secret+`"
}`)
		done := make(chan error, 1)
		go func() {
			_, err := loadModuleSourceCredentials(creds, []string{"registry.example.com"}, func(string) (string, bool) { return "", false })
			done <- err
		}()
		select {
		case err := <-done:
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("password_file %s: %v, want %q", tc.secret, err, tc.want)
			}
		case <-time.After(time.Minute): // a refusal takes milliseconds; a wait on the FIFO never ends
			if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
			t.Fatalf("password_file %s: still reading after a minute", tc.secret)
		}
	}
}
