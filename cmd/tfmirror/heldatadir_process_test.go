package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/internal/certs"
	"github.com/tfmirror/tfmirror/v2/internal/scratch"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestSecondServeOnAHeldDataDirIsRefused: a second `tfmirror serve` on
// the data directory a running one holds exits with an error at once,
// saying the cache is held, whether its disk is above the reserve or
// below it (where it used to serve on without the cache), and leaves the
// running serve's state alone: its admin socket (which it used to take
// over, and remove at exit), its module scratch, and its generated
// certificate and key (which a serve asked for another name used to issue
// again before it found the cache held). The running serve keeps
// answering on its admin socket.
func TestSecondServeOnAHeldDataDirIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	origin := enginetest.StartOrigin(t, fakeorigin.Options{})
	caFile := originCAFile(t, origin)
	dataDir := filepath.Join(t.TempDir(), "data")
	startProcess(t, bin, dataDir, origin, caFile)

	sock := admin.SocketPath(dataDir)
	sockBefore, err := os.Stat(sock)
	if err != nil {
		t.Fatalf("the running serve's admin socket: %v", err)
	}
	// Module work of the running serve under way.
	work := filepath.Join(dataDir, scratch.Module+"under-way")
	if err := os.Mkdir(work, 0o700); err != nil {
		t.Fatal(err)
	}
	tlsFiles := []string{certs.CAFile, certs.ServerFile, certs.ServerKeyFile}
	tlsBefore := make(map[string][]byte)
	for _, name := range tlsFiles {
		if tlsBefore[name], err = os.ReadFile(filepath.Join(dataDir, "tls", name)); err != nil {
			t.Fatal(err)
		}
	}

	// What a serve said of a held data directory on a disk with room
	// (Badger's refusal) before the cache took the lock itself.
	cacheDir := filepath.Join(dataDir, "cache")
	want := "tfmirror: opening cache: cache: opening " + cacheDir + ": Cannot acquire directory lock on " +
		strconv.Quote(cacheDir) + ".  Another process is using this Badger database."
	for _, tc := range []struct{ name, reserve string }{
		{"above the reserve", "10MiB"},
		{"below the reserve", "1EiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir,
				"--allowed-origins", origin.Addr, "--allow-private-origins", "--log-format", "json",
				"--disk-reserve", tc.reserve, "--tls-san", "second.example")
			cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+caFile)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			switch {
			case ctx.Err() != nil:
				t.Errorf("the second serve did not exit within 30s (it serves): %s", out)
			case !errors.As(err, &exit):
				t.Errorf("the second serve: %v, want it to exit with an error: %s", err, out)
			case !strings.Contains(string(out), want):
				t.Errorf("the second serve said %s; want %q", out, want)
			}

			if after, err := os.Stat(sock); err != nil || !os.SameFile(sockBefore, after) {
				t.Errorf("the running serve's admin socket was replaced or removed (%v)", err)
			}
			if _, err := os.Stat(work); err != nil {
				t.Errorf("the running serve's module scratch was removed: %v", err)
			}
			for _, name := range tlsFiles {
				if b, err := os.ReadFile(filepath.Join(dataDir, "tls", name)); err != nil || !bytes.Equal(b, tlsBefore[name]) {
					t.Errorf("tls/%s was written again (%v)", name, err)
				}
			}
			c, err := admin.Dial(context.Background(), dataDir)
			if err != nil {
				t.Fatalf("the running serve no longer answers on its admin socket: %v", err)
			}
			c.Close()
		})
	}
}
