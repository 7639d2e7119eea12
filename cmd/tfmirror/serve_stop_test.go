package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// brokenListener fails every Accept, as a listener whose socket broke.
type brokenListener struct{ net.Listener }

var errBrokenListener = errors.New("accept: the listener broke")

func (brokenListener) Accept() (net.Conn, error) { return nil, errBrokenListener }

// TestServeErrorStopsEveryListener: when the mirror's listener fails, serve
// returns its error only once the metrics listener and the admin socket
// it started are closed and their goroutines ended: a caller that goes on
// (a test, a supervisor in the same process) finds neither the port nor
// the socket held.
func TestServeErrorStopsEveryListener(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	metricsAddr := freeLoopbackAddr(t)
	cfg, err := parseServeFlags([]string{"--data-dir", dir, "--allowed-origins", tfRegistry,
		"--metrics-listen", metricsAddr}, func(string) (string, bool) { return "", false }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m, err := newServer(cfg, slog.New(slog.NewTextHandler(testWriter{t}, nil)), overrides{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() { done <- m.serve(context.Background(), brokenListener{ln}) }()
	select {
	case err := <-done:
		if !errors.Is(err, errBrokenListener) {
			t.Fatalf("serve returned %v, want the listener's error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not return within 30s of its listener failing")
	}
	if c, err := net.DialTimeout("tcp", metricsAddr, time.Second); err == nil {
		c.Close()
		t.Errorf("the metrics listener %s still accepts connections after serve returned", metricsAddr)
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dialing the metrics listener after serve returned: %v, want connection refused", err)
	}
	if c, err := admin.Dial(context.Background(), dir); err == nil {
		c.Close()
		t.Error("the admin socket still answers after serve returned")
	}
}

// TestServeLeavesNoGoroutine serves a mirror with its metrics listener
// and admin socket, asks it for documents and for an archive whose
// client goes away while the origin holds the download, then stops it:
// once serve has returned (the engine shut down, the cache closed) and
// the origin is gone, no goroutine the mirror started is left. Not
// parallel: it counts the process's goroutines.
func TestServeLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() { // last, after the mirror's and the origin's
		deadline := time.Now().Add(time.Minute) // goroutines ending: milliseconds unless the machine is loaded
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			t.Errorf("%d goroutines after the mirror stopped, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
		}
	})
	origin := newOrigin(t, fakeorigin.Options{ArchiveSize: 256 << 10})
	origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	tm := startMirror(t, origin, t.TempDir(), nil, "--metrics-listen", "127.0.0.1:0", "--shutdown-timeout", "100ms")
	t.Cleanup(tm.client.CloseIdleConnections)
	for _, path := range []string{tfRegistry + "/hashicorp/random/index.json", tfRegistry + "/hashicorp/random/3.6.0.json"} {
		if resp, body, err := tm.get(path); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %v %s", path, err, body)
		}
	}
	release := origin.GateArchives()
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, tm.url+archiveURL("random", "3.6.0", "linux_amd64"), nil)
	if err != nil {
		t.Fatal(err)
	}
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		if resp, err := tm.client.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	origin.WaitArchiveStarted()
	cancel() // the client goes away; the download goes on, held at the origin
	<-gone
	tm.stop() // the download is cut at the shutdown deadline
}
