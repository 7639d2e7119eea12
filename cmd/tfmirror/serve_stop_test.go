package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/admin"
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
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := free.Addr().String()
	free.Close()
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
