package main

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestGracefulShutdown stops tfmirror with SIGTERM while an archive is
// being downloaded through it.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const ns, typ, version, pl = "hashicorp", "random", "1.0.0", "linux_amd64"
	bin := buildBinary(t)

	// start runs a mirror and begins a download that stalls at half way.
	start := func(t *testing.T, shutdownTimeout string) (*fakeorigin.Origin, *proc, string, func(), chan download) {
		origin, err := fakeorigin.Start(fakeorigin.Options{ArchiveSize: 4 << 20})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(origin.Close)
		origin.AddProvider(ns, typ, []string{version}, []string{pl})
		dataDir := filepath.Join(t.TempDir(), "data")
		m := startProcess(t, bin, dataDir, origin, originCAFile(t, origin), "--shutdown-timeout", shutdownTimeout)
		release := origin.GateArchives()
		t.Cleanup(release)
		progress := make(chan struct{}, 1)
		done := make(chan download, 1)
		go func() { done <- fetchAll(m, providerArchivePath(origin, ns, typ, version, pl), 1<<20, progress) }()
		select {
		case <-progress:
		case d := <-done:
			t.Fatalf("download ended before the shutdown: %v", d.err)
		case <-time.After(30 * time.Second):
			t.Fatal("download did not start")
		}
		if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		m.waitLog("shutting down", 10*time.Second)
		return origin, m, dataDir, release, done
	}

	t.Run("download in flight completes", func(t *testing.T) {
		t.Parallel()
		origin, m, dataDir, release, done := start(t, "20s")
		// The listener closes at once; the download goes on.
		waitRefused(t, m.addr)
		release()
		d := <-done
		want := origin.Archive(ns, typ, version, pl)
		if d.err != nil || !bytes.Equal(d.body, want) {
			t.Fatalf("download across the shutdown: %v, %d bytes (want %d correct ones)", d.err, len(d.body), len(want))
		}
		if err := m.wait(30 * time.Second); err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
		if m.logged("stopped") == nil {
			t.Error(`no "stopped" log line`)
		}
		// The cache was closed cleanly and holds the archive.
		store, err := cache.Open(cache.Options{Dir: filepath.Join(dataDir, "cache")})
		if err != nil {
			t.Fatalf("reopening the cache: %v", err)
		}
		defer store.Close()
		if _, err := store.StatBlob(origin.SHA256(ns, typ, version, pl)); err != nil {
			t.Errorf("archive downloaded during shutdown not cached: %v", err)
		}
	})

	t.Run("deadline cuts off a stuck download", func(t *testing.T) {
		t.Parallel()
		origin, m, dataDir, _, done := start(t, "1s")
		if err := m.wait(30 * time.Second); err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
		if d := <-done; d.err == nil {
			t.Error("the stuck download completed?")
		}
		if m.logged("requests still running at the shutdown deadline were cut off") == nil {
			t.Error("no log line about requests cut off at the deadline")
		}
		store, err := cache.Open(cache.Options{Dir: filepath.Join(dataDir, "cache")})
		if err != nil {
			t.Fatalf("reopening the cache: %v", err)
		}
		defer store.Close()
		if _, err := store.StatBlob(origin.SHA256(ns, typ, version, pl)); !errors.Is(err, cache.ErrNotFound) {
			t.Errorf("a download cut off by the shutdown is cached: %v", err)
		}
	})
}

type download struct {
	body []byte
	err  error
}

// fetchAll downloads path in full, signalling progress once more than
// atLeast bytes have arrived.
func fetchAll(m *proc, path string, atLeast int, progress chan<- struct{}) download {
	resp, err := m.client.Get(m.url + path[1:])
	if err != nil {
		return download{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return download{err: errors.New(resp.Status)}
	}
	var body bytes.Buffer
	buf := make([]byte, 64<<10)
	signalled := false
	for {
		n, err := resp.Body.Read(buf)
		body.Write(buf[:n])
		if !signalled && body.Len() > atLeast {
			signalled = true
			progress <- struct{}{}
		}
		if err == io.EOF {
			return download{body: body.Bytes()}
		}
		if err != nil {
			return download{body: body.Bytes(), err: err}
		}
	}
}

// waitRefused waits until addr refuses new connections.
func waitRefused(t *testing.T, addr string) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Fatalf("dial after shutdown began: %v, want connection refused", err)
			}
			return
		}
		c.Close()
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("still accepting connections 10s after the shutdown began")
		}
	}
}

// TestShutdownEndsDownloadsBeforeClosingCache stops a mirror whose
// shutdown deadline passes while an archive download is held at the
// origin: the engine must cancel the download and wait for it to end
// before the cache is closed, so that nothing writes to a closed cache.
func TestShutdownEndsDownloadsBeforeClosingCache(t *testing.T) {
	const ns, typ, version, pl = "hashicorp", "random", "1.0.0", "linux_amd64"
	origin := newOrigin(t, fakeorigin.Options{ArchiveSize: 1 << 20})
	origin.AddProvider(ns, typ, []string{version}, []string{pl})
	tm := startMirror(t, origin, t.TempDir(), nil, "--insecure-http", "--shutdown-timeout", "100ms")
	release := origin.GateArchives()
	defer release()

	done := make(chan error, 1)
	go func() {
		_, _, err := tm.get(archiveURL(typ, version, pl))
		done <- err
	}()
	origin.WaitArchiveStarted()
	if n := metric(t, tm.m.registry, "tfmirror_origin_inflight_archive_fetches"); n != 1 {
		t.Fatalf("archive fetches in flight = %v, want 1", n)
	}
	tm.stop() // waits for serve to return
	if err := <-done; err == nil {
		t.Error("the held download completed across the shutdown deadline?")
	}
	if n := metric(t, tm.m.registry, "tfmirror_origin_inflight_archive_fetches"); n != 0 {
		t.Errorf("archive fetches in flight once serve returned = %v, want 0 (the cache is closed)", n)
	}
}
