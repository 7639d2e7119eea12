package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// countingMetrics counts cache write failures; the rest is discarded.
type countingMetrics struct {
	noMetrics
	writeFailures atomic.Int64
}

func (m *countingMetrics) CacheWriteFailed() { m.writeFailures.Add(1) }

// switchableFailure fails every cache write while on, like a full disk.
type switchableFailure struct {
	mu sync.Mutex
	on bool
}

func (f *switchableFailure) set(on bool) {
	f.mu.Lock()
	f.on = on
	f.mu.Unlock()
}

func (f *switchableFailure) fail() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.on {
		return errors.New("write /data/cache/000001.vlog: no space left on device")
	}
	return nil
}

func TestDiskFullStillServes(t *testing.T) {
	t.Parallel()
	disk := &switchableFailure{on: true}
	met := &countingMetrics{}
	h := newHarness(t, harnessOptions{
		cfg:    Config{Metrics: met},
		origin: fakeorigin.Options{ArchiveSize: 3 << 20},
		store:  cache.Options{FailWrites: disk.fail},
	})
	const version, pl = "1.0.0", "linux_amd64"
	h.origin.AddProvider(ns, typ, []string{version}, []string{pl})
	want := h.origin.Archive(ns, typ, version, pl)
	sha := h.origin.SHA256(ns, typ, version, pl)

	// Metadata that cannot be stored is still answered.
	if _, _, err := h.engine.Versions(t.Context(), h.provider()); err != nil {
		t.Fatalf("version list with a full disk: %v", err)
	}
	if _, err := h.packages(version); err != nil {
		t.Fatalf("package metadata with a full disk: %v", err)
	}
	if n := met.writeFailures.Load(); n < 2 {
		t.Errorf("write failures after two uncacheable metadata documents = %d, want >= 2", n)
	}
	// With room on the disk for a moment the metadata is cached, so that
	// what follows writes nothing but the archive.
	disk.set(false)
	h.engine.Versions(t.Context(), h.provider())
	h.packages(version)
	disk.set(true)
	metaFailures := met.writeFailures.Load()

	r := h.read(t.Context(), version, pl)
	if r.err != nil || !bytes.Equal(r.body, want) {
		t.Fatalf("archive with a full disk: err %v, %d bytes (want %d correct ones)", r.err, len(r.body), len(want))
	}
	h.waitIdle()
	if _, err := h.store.StatBlob(sha); !errors.Is(err, cache.ErrNotFound) {
		t.Fatalf("archive cached although its chunks could not be written: %v", err)
	}
	if got := met.writeFailures.Load(); got != metaFailures+1 {
		t.Errorf("write failures = %d, want %d (one for the archive)", got, metaFailures+1)
	}
	if n, err := cachetest.ChunkCount(h.store); n != 0 || err != nil {
		t.Errorf("ChunkCount = %d, %v after the failed archive write; want nothing left behind", n, err)
	}

	// Once the disk has room again the next request caches the archive.
	disk.set(false)
	r = h.read(t.Context(), version, pl)
	if r.err != nil || !bytes.Equal(r.body, want) {
		t.Fatalf("archive after the disk recovered: err %v, %d bytes", r.err, len(r.body))
	}
	h.waitCommitted(sha)
	if n := h.origin.ArchiveHits(ns, typ, version, pl); n != 2 {
		t.Errorf("origin archive fetches = %d, want 2", n)
	}
	r = h.read(t.Context(), version, pl)
	if r.source != records.Hit || !bytes.Equal(r.body, want) {
		t.Errorf("third request: source %v, correct bytes %v", r.source, bytes.Equal(r.body, want))
	}
}

func TestCacheSizeLimitEvicts(t *testing.T) {
	t.Parallel()
	const archiveSize = 256 << 10
	var evicted atomic.Int64
	evictions := make(chan struct{}, 8)
	h := newHarness(t, harnessOptions{
		origin: fakeorigin.Options{ArchiveSize: archiveSize},
		// Room for two archives, not three.
		store: cache.Options{MaxBytes: archiveSize*5/2 + 4096, OnEvict: func(cache.BlobInfo) {
			evicted.Add(1)
			evictions <- struct{}{}
		}},
	})
	const version = "1.0.0"
	h.origin.AddProvider(ns, typ, []string{version}, platforms)
	for _, pl := range platforms {
		want := h.origin.Archive(ns, typ, version, pl)
		if r := h.read(t.Context(), version, pl); r.err != nil || !bytes.Equal(r.body, want) {
			t.Fatalf("%s: err %v, %d bytes", pl, r.err, len(r.body))
		}
		h.waitCommitted(h.origin.SHA256(ns, typ, version, pl))
	}
	// Eviction runs in the background.
	select {
	case <-evictions:
	case <-time.After(30 * time.Second):
		t.Fatal("no archive evicted over the limit")
	}
	first := platforms[0]
	if _, err := h.store.StatBlob(h.origin.SHA256(ns, typ, version, first)); !errors.Is(err, cache.ErrNotFound) {
		t.Errorf("least recently used archive still cached: %v", err)
	}
	if n, total := h.store.Stats(); n != 2 || total > archiveSize*5/2+4096 {
		t.Errorf("cache holds %d archives, %d bytes; want 2 under the limit", n, total)
	}
	if evicted.Load() != 1 {
		t.Errorf("evictions reported = %d, want 1", evicted.Load())
	}
	// An evicted archive is fetched again, correctly.
	want := h.origin.Archive(ns, typ, version, first)
	if r := h.read(t.Context(), version, first); r.err != nil || !bytes.Equal(r.body, want) || r.source != records.Miss {
		t.Fatalf("evicted archive: err %v source %v", r.err, r.source)
	}
	if n := h.origin.ArchiveHits(ns, typ, version, first); n != 2 {
		t.Errorf("origin fetches of the evicted archive = %d, want 2", n)
	}
	h.waitIdle()
}

func TestConcurrentRequestsForManyPlatformsOfOneVersion(t *testing.T) {
	t.Parallel()
	// Each caller needs the package metadata of its own platform; while
	// one fetch runs, callers for other platforms queue behind it.
	pls := []string{"darwin_amd64", "darwin_arm64", "freebsd_amd64", "linux_386", "linux_amd64", "linux_arm", "linux_arm64", "windows_amd64"}
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, pls)
	h.origin.SetLatency(5 * time.Millisecond)
	var wg sync.WaitGroup
	errs := make(chan string, len(pls)*4)
	for _, pl := range pls {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := h.read(context.Background(), "1.0.0", pl)
				if r.err != nil || !bytes.Equal(r.body, h.origin.Archive(ns, typ, "1.0.0", pl)) {
					errs <- fmt.Sprintf("%s: %v", pl, r.err)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	h.waitIdle()
}
