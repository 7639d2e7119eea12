package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
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
		// A deadline the download cannot miss, loaded machine or not:
		// the mirror exits once the download is done, not at it. (With
		// 20s, a loaded machine's waits for the log line, the closed
		// listener and the rest of the download could reach it.)
		origin, m, dataDir, release, done := start(t, "10m")
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
		checkCutOff(t, m, 4<<20)
		checkNotCached(t, dataDir, origin.SHA256(ns, typ, version, pl))
	})

	t.Run("a second signal ends the wait at once", func(t *testing.T) {
		t.Parallel()
		origin, m, dataDir, _, done := start(t, "10m")
		// The line says what the shutdown waits for.
		line := m.logged("shutting down")
		if line["requests"] != 1.0 || line["downloads"] != 1.0 {
			t.Errorf("shutting down with requests=%v downloads=%v, want 1 and 1", line["requests"], line["downloads"])
		}
		began := time.Now()
		if err := m.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		// Well short of the 10m deadline, with room for a loaded
		// machine's stalls.
		if err := m.wait(3 * time.Minute); err != nil {
			t.Fatalf("exit after the second signal: %v", err)
		}
		if took := time.Since(began); took > 2*time.Minute {
			t.Errorf("the second signal took %s to stop the mirror", took)
		}
		if d := <-done; d.err == nil {
			t.Error("the stuck download completed?")
		}
		if m.logged("second signal: cutting off the requests and downloads still running now, not at the shutdown deadline") == nil {
			t.Error("no log line about the second signal")
		}
		if m.logged("stopped") == nil {
			t.Error(`no "stopped" log line: the cache was not closed`)
		}
		checkCutOff(t, m, 4<<20)
		checkNotCached(t, dataDir, origin.SHA256(ns, typ, version, pl))
	})
}

// TestShutdownCutsOffSlowClient stops a mirror with SIGINT while a client
// reads a cached archive too slowly to finish before the shutdown
// deadline: its response is cut off, and the access log says so
// (aborted, the bytes it got short of the archive), as it does not for
// a client that goes away on its own.
func TestShutdownCutsOffSlowClient(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const ns, typ, version, pl, size = "hashicorp", "random", "1.0.0", "linux_amd64", 16 << 20
	bin := buildBinary(t)
	origin, err := fakeorigin.Start(fakeorigin.Options{ArchiveSize: size})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	origin.AddProvider(ns, typ, []string{version}, []string{pl})
	m := startProcess(t, bin, filepath.Join(t.TempDir(), "data"), origin, originCAFile(t, origin), "--shutdown-timeout", "1s")
	path := providerArchivePath(origin, ns, typ, version, pl)
	if _, _, err := m.get(t.Context(), path); err != nil { // into the cache
		t.Fatal(err)
	}

	// A client that goes away half way is not a cut-off.
	resp, err := m.client.Get(m.url + path[1:])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(io.Discard, resp.Body, 1<<20); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	gone := waitRequestLine(t, m, 2)
	if gone["aborted"] != false {
		t.Errorf("a client that went away is logged aborted: %v", gone)
	}

	// One that reads 1 MiB a second is cut off by the shutdown.
	resp, err = m.client.Get(m.url + path[1:])
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	read := make(chan error, 1)
	go func() {
		buf := make([]byte, 64<<10)
		for {
			if _, err := io.ReadFull(resp.Body, buf); err != nil {
				read <- err
				return
			}
			time.Sleep(60 * time.Millisecond)
		}
	}()
	time.Sleep(500 * time.Millisecond)
	if err := m.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := m.wait(30 * time.Second); err != nil {
		t.Fatalf("exit after SIGINT: %v", err)
	}
	if err := <-read; err == nil || err == io.EOF {
		t.Errorf("the slow client read the whole archive across the deadline? (%v)", err)
	}
	checkCutOff(t, m, size)
}

// checkNotCached checks that the cache of dataDir, its mirror stopped,
// opens (it was closed cleanly) and holds nothing of the archive sha,
// whose download the shutdown cut off.
func checkNotCached(t *testing.T, dataDir, sha string) {
	t.Helper()
	store, err := cache.Open(cache.Options{Dir: filepath.Join(dataDir, "cache")})
	if err != nil {
		t.Fatalf("reopening the cache: %v", err)
	}
	defer store.Close()
	if _, err := store.StatBlob(sha); !errors.Is(err, cache.ErrNotFound) {
		t.Errorf("a download cut off by the shutdown is cached: %v", err)
	}
}

// waitRequestLine waits for the access log's nth archive line (from 1)
// and returns it.
func waitRequestLine(t *testing.T, m *proc, n int) map[string]any {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // milliseconds unless the machine is loaded
	for time.Now().Before(deadline) {
		if lines := archiveLines(m); len(lines) >= n {
			return lines[n-1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no access-log line for archive request %d", n)
	return nil
}

// archiveLines are m's access-log lines of archive requests.
func archiveLines(m *proc) []map[string]any {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []map[string]any
	for _, l := range m.lines {
		if l["msg"] == "request" && l["route"] == "archive" {
			out = append(out, l)
		}
	}
	return out
}

// checkCutOff checks the access-log line of the last archive request,
// cut off by the shutdown: its status is what was sent, its bytes short
// of the archive's size, and it is marked aborted.
func checkCutOff(t *testing.T, m *proc, size int64) {
	t.Helper()
	lines := archiveLines(m)
	if len(lines) == 0 {
		t.Fatal("no access-log line for the archive cut off")
	}
	l := lines[len(lines)-1]
	bytes, _ := l["bytes"].(float64)
	if l["aborted"] != true || l["status"] != 200.0 || bytes >= float64(size) {
		t.Errorf("access-log line of the archive cut off by the shutdown: status %v, bytes %v of %d, aborted %v; want 200, short, true",
			l["status"], l["bytes"], size, l["aborted"])
	}
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
	// The listener closes right after the "shutting down" line: at once
	// unless the machine is loaded.
	deadline := time.After(time.Minute)
	for {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			// A dial that meets the listener as it closes is reset.
			if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("dial after shutdown began: %v, want connection refused", err)
			}
			return
		}
		c.Close()
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("still accepting connections a minute after the shutdown began")
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

// TestAdminSocketRefusesOnceShutdownBegins: once a mirror begins to shut
// down, its admin socket takes no new command, as its port takes no new
// connection, while a download keeps the shutdown waiting: a sync,
// import or prune begun then would start work the shutdown is about to
// cut off (a sync's downloads from origins, an import's writes). It says
// the serve is shutting down, until it has stopped: `tfmirror reload`
// and `tfmirror cache prune` say so and fail, rather than say that no
// tfmirror serves the data directory (and the prune try to open the
// cache the serve still holds). Once the serve has stopped, the socket
// is gone.
func TestAdminSocketRefusesOnceShutdownBegins(t *testing.T) {
	t.Parallel()
	const typ, version, pl = "random", "1.0.0", "linux_amd64"
	origin := newOrigin(t, fakeorigin.Options{ArchiveSize: 1 << 20})
	origin.AddProvider("hashicorp", typ, []string{version}, []string{pl})
	dir := t.TempDir()
	tm := startMirror(t, origin, dir, nil, "--insecure-http", "--shutdown-timeout", "10m")
	release := origin.GateArchives()
	defer release()
	done := make(chan error, 1)
	go func() {
		_, _, err := tm.get(archiveURL(typ, version, pl))
		done <- err
	}()
	origin.WaitArchiveStarted()
	if c, err := admin.Dial(t.Context(), dir); err != nil {
		t.Fatalf("admin socket before the shutdown: %v", err)
	} else {
		c.Close()
	}
	stopped := make(chan struct{})
	go func() { defer close(stopped); tm.stop() }()
	// The port refuses; the download keeps the shutdown waiting.
	waitRefused(t, strings.TrimSuffix(strings.TrimPrefix(tm.url, "http://"), "/"))
	deadline := time.Now().Add(20 * time.Second) // before the origin's silence fails the download
	for {
		c, err := admin.Dial(t.Context(), dir)
		if errors.Is(err, admin.ErrShuttingDown) {
			break
		}
		if err == nil {
			c.Close()
		}
		if errors.Is(err, admin.ErrNoServer) || time.Now().After(deadline) {
			t.Fatalf("the admin socket of a serve shutting down: %v, want it to say it is shutting down", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, args := range [][]string{
		{"reload", "--data-dir", dir},
		{"cache", "prune", "--dry-run", "--data-dir", dir},
	} {
		code, _, stderr := runCommand(args...)
		if code == 0 || !strings.Contains(stderr, "is shutting down") {
			t.Errorf("tfmirror %s while the serve shuts down: exit %d, want a failure saying it is shutting down:\n%s", strings.Join(args[:len(args)-2], " "), code, stderr)
		}
	}
	release()
	if err := <-done; err != nil {
		t.Errorf("the download in flight across the shutdown: %v", err)
	}
	<-stopped
	if _, err := admin.Dial(t.Context(), dir); !errors.Is(err, admin.ErrNoServer) {
		t.Errorf("the admin socket once the serve stopped: %v, want none", err)
	}
}

// With --shutdown-delay, a SIGTERM first has /readyz answer 503 while the
// mirror goes on serving (new connections and requests too), so that a
// load balancer probing /readyz takes it out before its port closes;
// then the shutdown goes on as without it. Without the delay, a client a
// Kubernetes Service still routed to the pod met a refused connection.
// The delay is long enough for the requests made within it to be made
// there on a loaded machine (at 4 s, a new connection came after it once).
func TestShutdownDelayAnswersNotReadyWhileServing(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	origin := enginetest.StartOrigin(t, fakeorigin.Options{})
	m := startProcess(t, bin, filepath.Join(t.TempDir(), "data"), origin, originCAFile(t, origin), "--shutdown-delay", "12s")
	ready := func() (int, string) {
		t.Helper()
		body, resp, err := m.get(context.Background(), "readyz")
		if resp == nil {
			t.Fatalf("/readyz: %v", err)
		}
		return resp.StatusCode, string(body)
	}
	if code, body := ready(); code != http.StatusOK {
		t.Fatalf("/readyz before the signal: %d %s", code, body)
	}
	start := time.Now()
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	m.waitLog("shutting down: /readyz answers 503, serving on while load balancers take the mirror out", 10*time.Second)
	code, body := ready()
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"shutting_down"`) {
		t.Errorf("/readyz in the delay: %d %s, want 503 shutting_down", code, body)
	}
	// A new connection is still taken and served.
	m.client.CloseIdleConnections()
	if _, resp, err := m.get(context.Background(), "healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz on a new connection in the delay: %v, %v", resp, err)
	}
	if m.logged("shutting down") != nil && time.Since(start) < 11*time.Second {
		t.Error("the port's shutdown began before the delay ran out")
	}
	waitRefused(t, m.addr)
	if d := time.Since(start); d < 12*time.Second {
		t.Errorf("the port closed %v after the signal, before the 12s delay", d)
	}
	if err := m.wait(30 * time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}
