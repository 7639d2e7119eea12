package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestKillDuringDownloadsAndRestart kills tfmirror with SIGKILL while
// many clients download archives, restarts it on the same data directory
// and checks that nothing partial is served or kept.
func TestKillDuringDownloadsAndRestart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const (
		ns, typ, version = "hashicorp", "random", "1.0.0"
		archiveSize      = 4 << 20
		clientsPerFile   = 6
	)
	bin := buildBinary(t)
	origin, err := fakeorigin.Start(fakeorigin.Options{ArchiveSize: archiveSize})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	committed := "linux_amd64"
	inflight := []string{"darwin_arm64", "linux_arm64", "windows_amd64", "freebsd_amd64"}
	origin.AddProvider(ns, typ, []string{version}, append([]string{committed}, inflight...))
	caFile := originCAFile(t, origin)
	dataDir := filepath.Join(t.TempDir(), "data")
	ctx := context.Background()

	m := startProcess(t, bin, dataDir, origin, caFile)

	// One archive is complete and committed before the crash.
	want := origin.Archive(ns, typ, version, committed)
	if body, _, err := m.get(ctx, providerArchivePath(origin, ns, typ, version, committed)); err != nil || !bytes.Equal(body, want) {
		t.Fatalf("warm-up download: %v, %d bytes", err, len(body))
	}
	waitCached(t, m, 1)

	// The others are mid-flight: the origin sends half of each and stalls.
	release := origin.GateArchives()
	defer release()
	var (
		wg       sync.WaitGroup
		progress = make(chan struct{}, len(inflight)*clientsPerFile)
		results  = make(chan error, len(inflight)*clientsPerFile)
	)
	for _, pl := range inflight {
		for range clientsPerFile {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results <- readUntilCut(m, providerArchivePath(origin, ns, typ, version, pl), 5<<20/4, progress)
			}()
		}
	}
	// Every client has more than a chunk's worth: each archive has staged
	// chunks in the cache when the process dies.
	timeout := time.After(60 * time.Second)
	for range len(inflight) * clientsPerFile {
		select {
		case <-progress:
		case err := <-results:
			t.Fatalf("a client finished before the crash: %v", err)
		case <-timeout:
			t.Fatal("downloads did not get under way")
		}
	}
	if err := m.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := m.wait(30 * time.Second); err == nil {
		t.Fatal("tfmirror exited cleanly after SIGKILL?")
	}
	wg.Wait()
	close(results)
	for err := range results {
		if err == nil {
			t.Error("a client received a complete archive from a download that was cut off")
		}
	}
	release()

	// Restart on the same data directory.
	m2 := startProcess(t, bin, dataDir, origin, caFile)
	cleaned := m2.waitLog("removed chunks of interrupted archive writes", 30*time.Second) // in the background, after start-up
	if cleaned == nil {
		t.Fatal("restart did not report removing the chunks of interrupted downloads")
	}
	t.Logf("restart removed %v orphaned chunks", cleaned["chunks"])
	if n, _ := cleaned["chunks"].(float64); n < float64(len(inflight)) {
		t.Errorf("removed %v orphaned chunks, want at least one for each of the %d interrupted archives", n, len(inflight))
	}
	st := m2.status(t)
	if st.Archives != 1 || !slices.Equal(st.cachedPlatforms(), []string{committed}) {
		t.Fatalf("after the crash the status reports %d cached archives (%v); want only %s", st.Archives, st.cachedPlatforms(), committed)
	}
	if body, resp, err := m2.get(ctx, providerArchivePath(origin, ns, typ, version, committed)); err != nil ||
		!bytes.Equal(body, want) || resp.Header.Get("X-Tfmirror-Cache") != "hit" {
		t.Fatalf("committed archive after the crash: %v, correct %v", err, bytes.Equal(body, want))
	}

	// The interrupted archives are fetched again, in full.
	var wg2 sync.WaitGroup
	errs := make(chan error, len(inflight)*2)
	for _, pl := range inflight {
		for range 2 {
			wg2.Add(1)
			go func() {
				defer wg2.Done()
				body, _, err := m2.get(ctx, providerArchivePath(origin, ns, typ, version, pl))
				if err == nil && !bytes.Equal(body, origin.Archive(ns, typ, version, pl)) {
					err = errors.New(pl + ": wrong bytes")
				}
				errs <- err
			}()
		}
	}
	wg2.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("download after restart: %v", err)
		}
	}
	waitCached(t, m2, 1+len(inflight))

	// A clean stop leaves exactly the committed archives' chunks.
	if err := m2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := m2.wait(30 * time.Second); err != nil {
		t.Fatalf("tfmirror exited with %v after SIGTERM", err)
	}
	store, err := cache.Open(cache.Options{Dir: filepath.Join(dataDir, "cache")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	wantChunks := 0
	for _, pl := range append([]string{committed}, inflight...) {
		info, err := store.StatBlob(origin.SHA256(ns, typ, version, pl))
		if err != nil {
			t.Fatalf("%s not cached: %v", pl, err)
		}
		wantChunks += int((info.Size + cache.DefaultChunkSize - 1) / cache.DefaultChunkSize)
	}
	if n, err := cachetest.ChunkCount(store); err != nil || n != wantChunks {
		t.Errorf("ChunkCount = %d, %v; want %d (only committed archives' chunks)", n, err, wantChunks)
	}
}

// readUntilCut downloads path, signals progress once more than atLeast
// body bytes have arrived, and returns nil only if the whole body arrived.
func readUntilCut(m *proc, path string, atLeast int64, progress chan<- struct{}) error {
	resp, err := m.client.Get(m.url + path[1:])
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	buf := make([]byte, 64<<10)
	var n int64
	signalled := false
	for {
		k, err := resp.Body.Read(buf)
		n += int64(k)
		if !signalled && n > atLeast {
			signalled = true
			progress <- struct{}{}
		}
		if err == io.EOF {
			if n == resp.ContentLength {
				return nil
			}
			return io.ErrUnexpectedEOF
		}
		if err != nil {
			return err
		}
	}
}

// waitCached polls the status document until n archives are cached: the
// commit follows the last byte sent to clients by a moment.
func waitCached(t *testing.T, m *proc, n int) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(2 * time.Minute) // a background commit: milliseconds unless the machine is loaded
	for {
		if got := m.status(t).Archives; got == n {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("status never reported %d cached archives (now %d)", n, m.status(t).Archives)
		}
	}
}
