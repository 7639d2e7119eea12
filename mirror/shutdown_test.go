package mirror

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// fetchMetrics counts archive fetches that have not yet ended.
type fetchMetrics struct {
	noMetrics
	running atomic.Int64
}

func (m *fetchMetrics) ArchiveFetchStarted() func() {
	m.running.Add(1)
	return func() { m.running.Add(-1) }
}

func TestShutdown(t *testing.T) {
	t.Parallel()
	const version, pl = "1.0.0", "linux_amd64"
	// start begins a download that the origin holds at half way, with no
	// reader left (EnsureArchive gives up waiting; the download goes on).
	start := func(t *testing.T) (*harness, *fetchMetrics, func()) {
		met := &fetchMetrics{}
		h := newHarness(t, harnessOptions{cfg: Config{Metrics: met}, origin: fakeorigin.Options{ArchiveSize: 1 << 20}})
		h.origin.AddProvider(ns, typ, []string{version}, []string{pl})
		release := h.origin.GateArchives()
		t.Cleanup(release)
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			h.origin.WaitArchiveStarted()
			cancel()
		}()
		if _, err := h.engine.EnsureArchive(ctx, h.provider(), mustVersion(t, version), mustPlatform(t, pl)); !errors.Is(err, context.Canceled) {
			t.Fatalf("EnsureArchive: %v, want it to stop waiting at cancel", err)
		}
		if met.running.Load() != 1 {
			t.Fatalf("archive fetches running = %d, want 1", met.running.Load())
		}
		return h, met, release
	}

	t.Run("download in progress finishes", func(t *testing.T) {
		h, met, release := start(t)
		// The origin lets the download go on only once Shutdown has begun.
		h.engine.onStop = release
		if err := h.engine.Shutdown(context.Background()); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		if n := met.running.Load(); n != 0 {
			t.Errorf("archive fetches running after Shutdown = %d, want 0", n)
		}
		if _, err := h.store.StatBlob(h.origin.SHA256(ns, typ, version, pl)); err != nil {
			t.Errorf("archive downloaded during the shutdown not cached: %v", err)
		}
	})

	t.Run("deadline cancels the download", func(t *testing.T) {
		h, met, _ := start(t)
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if err := h.engine.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown: %v, want context.DeadlineExceeded", err)
		}
		// The download has ended: nothing uses the cache from here on,
		// and it may be closed.
		if n := met.running.Load(); n != 0 {
			t.Fatalf("archive fetches running after Shutdown = %d, want 0", n)
		}
		if _, err := h.store.StatBlob(h.origin.SHA256(ns, typ, version, pl)); !errors.Is(err, cache.ErrNotFound) {
			t.Errorf("a download cut off by the shutdown is cached: %v", err)
		}
		if _, err := h.engine.EnsureArchive(t.Context(), h.provider(), mustVersion(t, version), mustPlatform(t, pl)); !errors.Is(err, records.ErrShutDown) {
			t.Errorf("EnsureArchive after Shutdown: %v, want ErrShutDown", err)
		}
		other := h.provider()
		other.Type = "other"
		if _, _, err := h.engine.Versions(t.Context(), other); !errors.Is(err, records.ErrShutDown) {
			t.Errorf("Versions of an uncached provider after Shutdown: %v, want ErrShutDown", err)
		}
	})
}
