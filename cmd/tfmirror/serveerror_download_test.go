package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestServeErrorBoundsTheWaitForDownloads: when the mirror's listener
// fails while an archive download is held at its origin, serve returns
// its error once --shutdown-timeout has passed, the download cancelled,
// as a shutdown does: it does not wait for the download to end, which an
// origin that holds it may make an hour (--archive-timeout).
func TestServeErrorBoundsTheWaitForDownloads(t *testing.T) {
	t.Parallel()
	const typ, version, pl = "random", "1.0.0", "linux_amd64"
	origin := newOrigin(t, fakeorigin.Options{ArchiveSize: 1 << 20})
	origin.AddProvider("hashicorp", typ, []string{version}, []string{pl})
	dir := t.TempDir()
	cfg, err := parseServeFlags([]string{"--data-dir", dir, "--allowed-origins", tfRegistry, "--allow-private-origins",
		"--insecure-http", "--shutdown-timeout", "100ms"}, func(string) (string, bool) { return "", false }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// The origin's timeouts do not end the held download within the test.
	slowOrigin := func(c *discovery.Config) {
		fastRetries(c)
		c.IdleTimeout = 10 * time.Minute
		c.MinSpeed = -1
	}
	m, err := newServer(cfg, slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		overrides{dialContext: routeRegistryTo(origin), origin: slowOrigin, rootCAs: origin.CertPool()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	release := origin.GateArchives()
	defer release() // lets a serve that waits for the download return
	done := make(chan error, 1)
	go func() { done <- m.serve(context.Background(), ln) }()

	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	got := make(chan struct{})
	go func() {
		defer close(got)
		if resp, err := client.Get("http://" + ln.Addr().String() + "/" + archiveURL(typ, version, pl)); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	origin.WaitArchiveStarted()
	ln.Close() // the listener fails: serve ends with its error

	select {
	case err := <-done:
		if err == nil || errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve returned %v, want the listener's error", err)
		}
	case <-time.After(2 * time.Minute):
		t.Error("serve had not returned two minutes after its listener failed, with --shutdown-timeout 100ms: it waits for the download held at the origin")
		release()
		<-done
	}
	<-got
}
