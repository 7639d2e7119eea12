package mirror

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/mirror/fetch"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// A caller that asks for an archive just after its download failed
// (told of the failure, or asking by chance at that moment) starts a
// download of its own, not a join of the failed one, and is never handed
// the bad bytes as an archive: it gets the integrity error, from
// OpenArchive (an error status for an HTTP client) or, when its own
// download had started streaming, from a Read before the held-back last
// bytes (a reset).
func TestAskingAgainAfterAFailedDownload(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	h.origin.TamperArchive(ns, typ, "1.0.0", "linux_amd64", true)
	size := len(h.origin.Archive(ns, typ, "1.0.0", "linux_amd64"))

	var late archive
	var once sync.Once
	h.engine.archives.SetHooks(fetch.Hooks{Fail: func() {
		once.Do(func() { late = h.read(context.Background(), "1.0.0", "linux_amd64") })
	}})
	first := h.read(context.Background(), "1.0.0", "linux_amd64")
	if !errors.Is(first.err, verify.ErrIntegrity) {
		t.Fatalf("first reader: %v, want an integrity error", first.err)
	}
	h.waitIdle()
	if !errors.Is(late.err, verify.ErrIntegrity) || len(late.body) >= size {
		t.Fatalf("caller asking again after the failure: opened %v, %d of %d bytes, err %v; want the integrity error before the last bytes",
			late.opened, len(late.body), size, late.err)
	}
	if n := h.origin.ArchiveHits(ns, typ, "1.0.0", "linux_amd64"); n != 2 {
		t.Fatalf("the origin was asked for the archive %d times, want 2: the caller asking again must start a download of its own", n)
	}
}

// evictingStore makes an archive vanish between the engine's looking it
// up and opening it: the first OpenBlob does not find it (it is
// committed just after), the second finds it evicted.
type evictingStore struct {
	Store
	store *cache.Store
	opens atomic.Int64
	on    atomic.Bool
}

func (s *evictingStore) OpenBlob(sha string) (cache.BlobReader, error) {
	if s.on.Load() {
		switch s.opens.Add(1) {
		case 1:
			return nil, cache.ErrNotFound
		case 2:
			if err := cachetest.DeleteBlob(s.store, sha); err != nil {
				return nil, err
			}
		}
	}
	return s.Store.OpenBlob(sha)
}

// An archive evicted between lookup and open is fetched again, not a
// failure ("archive vanished").
func TestArchiveEvictedBetweenLookupAndOpen(t *testing.T) {
	t.Parallel()
	var es *evictingStore
	h := newHarness(t, harnessOptions{wrap: func(s Store) Store {
		es = &evictingStore{Store: s, store: s.(*cache.Store)}
		return es
	}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	want := h.origin.Archive(ns, typ, "1.0.0", "linux_amd64")
	if r := h.read(context.Background(), "1.0.0", "linux_amd64"); r.err != nil {
		t.Fatal(r.err)
	}
	h.waitCommitted(h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64"))

	es.on.Store(true)
	r := h.read(context.Background(), "1.0.0", "linux_amd64")
	if r.err != nil || !bytes.Equal(r.body, want) {
		t.Fatalf("archive evicted between lookup and open: err %v, %d bytes", r.err, len(r.body))
	}
	if r.source != records.Miss {
		t.Errorf("source %v, want a miss (fetched again)", r.source)
	}
	if n := h.origin.ArchiveHits(ns, typ, "1.0.0", "linux_amd64"); n != 2 {
		t.Errorf("origin archive fetches = %d, want 2", n)
	}
}

// Faults the engine finds itself in what an origin sends are the origin's
// faults, typed as such.
func TestArchiveTooLargeIsAnOriginFault(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{cfg: Config{MaxArchiveBytes: 100}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	_, err := h.engine.EnsureArchive(context.Background(), h.provider(), mustVersion(t, "1.0.0"), mustPlatform(t, "linux_amd64"))
	var bad *records.BadArchiveError
	if !errors.As(err, &bad) {
		t.Fatalf("EnsureArchive of an archive over the limit: %v (%T), want a *BadArchiveError", err, err)
	}
	r := h.read(context.Background(), "1.0.0", "linux_amd64")
	if r.opened || !errors.As(r.err, &bad) {
		t.Fatalf("OpenArchive of an archive over the limit: opened %v, err %v; want a *BadArchiveError", r.opened, r.err)
	}
}
