//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTrustLineRunsAsPrinted: the line serve logs for clients to trust
// the generated CA (export SSL_CERT_FILE=...), copied from the log and
// run in a shell, sets SSL_CERT_FILE to the CA's file also when the data
// directory, given relative, has a space or a quote in its path, where
// the path was printed bare and the shell set SSL_CERT_FILE to its first
// word (and exported the rest, or failed on the quote).
func TestTrustLineRunsAsPrinted(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", "it's my data")
	cmd.Dir, cmd.Env, cmd.Stdout = dir, []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}, io.Discard
	out, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); io.Copy(io.Discard, out); cmd.Wait() }()
	var logged strings.Builder
	line := ""
	for sc := bufio.NewScanner(out); line == "" && sc.Scan(); {
		logged.WriteString(sc.Text() + "\n")
		var rec struct{ Msg string }
		if json.Unmarshal(sc.Bytes(), &rec) == nil && strings.Contains(rec.Msg, "export SSL_CERT_FILE=") {
			line = rec.Msg[strings.Index(rec.Msg, "export SSL_CERT_FILE="):]
		}
	}
	if line == "" {
		t.Fatalf("serve logged no SSL_CERT_FILE line:\n%s", logged.String())
	}
	got, err := exec.Command("sh", "-c", line+"\nprintf %s \"$SSL_CERT_FILE\"").CombinedOutput()
	if want := filepath.Join(dir, "it's my data", "tls", "ca.pem"); err != nil || string(got) != want {
		t.Errorf("the logged line %q run in a shell: SSL_CERT_FILE=%q (%v), want %q", line, got, err, want)
	}
}
