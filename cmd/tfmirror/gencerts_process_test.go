//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/certs"
)

// TestGeneratedCAFilesProcess: the generated CA of the data directory
// (DATA-DIR/tls/ca.pem and ca-key.pem) is never replaced without a word.
// One of its two files missing (a restore that left private keys out, a
// careless rm) stops serve, naming the file and what to do, and leaves
// the other as it is: serve used to make a new CA over it, every client
// that trusted ca.pem refused the mirror, and its log said what it says at
// every start. A FIFO in place of one of the generated files stops serve
// at once naming it (the CA's) or is replaced (the server certificate's),
// where serve waited on it for ever, holding the data directory, before
// it logged anything.
func TestGeneratedCAFilesProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	tlsDir := filepath.Join(dataDir, "tls")
	run := func() (string, bool) { return serveUntilServing(t, bin, dir, "--data-dir", dataDir) }
	if logged, ok := run(); !ok {
		t.Fatalf("the first serve did not start:\n%s", logged)
	}
	files := []string{"ca.pem", "ca-key.pem", "server.pem", "server-key.pem"}
	original := map[string][]byte{}
	for _, name := range files {
		b, err := os.ReadFile(filepath.Join(tlsDir, name))
		if err != nil {
			t.Fatal(err)
		}
		original[name] = b
	}
	restore := func() {
		t.Helper()
		for _, name := range files {
			path := filepath.Join(tlsDir, name)
			os.Remove(path)
			if err := os.WriteFile(path, original[name], 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}

	for _, tc := range []struct {
		name, missing, other string
	}{
		{"key missing", "ca-key.pem", "ca.pem"},
		{"certificate missing", "ca.pem", "ca-key.pem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			restore()
			if err := os.Remove(filepath.Join(tlsDir, tc.missing)); err != nil {
				t.Fatal(err)
			}
			logged, served := run()
			if served {
				t.Errorf("serve started without tls/%s, with a new CA that no client trusts:\n%s", tc.missing, logged)
			} else if !strings.Contains(logged, filepath.Join(tlsDir, tc.missing)) || !strings.Contains(logged, "rm ") {
				t.Errorf("serve refused without naming tls/%s and what to remove to have a new CA made:\n%s", tc.missing, logged)
			}
			if b, err := os.ReadFile(filepath.Join(tlsDir, tc.other)); err != nil || !bytes.Equal(b, original[tc.other]) {
				t.Errorf("tls/%s was replaced (%v): clients trust the CA they had", tc.other, err)
			}
		})
	}

	t.Run("FIFO in place of the CA key", func(t *testing.T) {
		restore()
		fifo := filepath.Join(tlsDir, "ca-key.pem")
		os.Remove(fifo)
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		logged, served := run()
		if served || !strings.Contains(logged, fifo) || !strings.Contains(logged, "FIFO") {
			t.Errorf("after %s, serve with a FIFO for its CA key: served %v, want it to stop at once naming the FIFO:\n%s",
				time.Since(start).Round(time.Second), served, logged)
		}
	})

	t.Run("FIFO in place of the server key", func(t *testing.T) {
		restore()
		fifo := filepath.Join(tlsDir, "server-key.pem")
		os.Remove(fifo)
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		if logged, served := run(); !served {
			t.Errorf("serve with a FIFO for its generated server key did not issue it again and serve:\n%s", logged)
		}
		if b, err := os.ReadFile(filepath.Join(tlsDir, "ca.pem")); err != nil || !bytes.Equal(b, original["ca.pem"]) {
			t.Errorf("tls/ca.pem was replaced (%v)", err)
		}
	})
}

// serveUntilServing runs `tfmirror serve` with args, HOME at home, on a
// loopback port, and ends it once it serves; it returns what serve
// logged and whether it served.
func serveUntilServing(t *testing.T, bin, home string, args ...string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	out, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	served := false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		text.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "tfmirror is serving") {
			served = true
			cmd.Process.Kill()
			break
		}
	}
	io.Copy(io.Discard, out)
	cmd.Wait()
	if ctx.Err() != nil {
		text.WriteString("(still running after 30s: killed)\n")
	}
	return text.String(), served
}

// TestOperatorCertificateOutOfDateWarned: an operator's certificate
// (--tls-cert) that has expired, or is not valid yet, is served, as
// before, but serve says so at start, naming the file and the date, with
// what to do: every client refuses it, and the log said nothing of why.
func TestOperatorCertificateOutOfDateWarned(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	for _, tc := range []struct {
		name   string
		issued time.Time
		want   string
	}{
		{"expired", time.Now().Add(-2 * 365 * 24 * time.Hour), "expired"},
		{"not valid yet", time.Now().Add(365 * 24 * time.Hour), "not valid before"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			files, err := certs.Ensure(filepath.Join(dir, "operator"), []string{"localhost"}, tc.issued)
			if err != nil {
				t.Fatal(err)
			}
			logged, served := serveUntilServing(t, bin, dir, "--data-dir", filepath.Join(dir, "data"),
				"--tls-cert", files.Cert, "--tls-key", files.Key, "--log-format", "json")
			if !served {
				t.Fatalf("serve did not start:\n%s", logged)
			}
			warned := false
			for _, line := range strings.Split(logged, "\n") {
				if strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, tc.want) &&
					strings.Contains(line, files.Cert) && strings.Contains(line, "restart") {
					warned = true
				}
			}
			if !warned {
				t.Errorf("serve with an operator's certificate %s gave no warning naming the file, the date and what to do:\n%s", tc.name, logged)
			}
		})
	}
}
