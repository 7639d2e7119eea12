package sharedtier

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/stored"
	"github.com/tfmirror/tfmirror/v2/sharedstore"
)

// fakeTier is a tier in memory; its lease is held by another replica
// while othersLease is set.
type fakeTier struct {
	mu          sync.Mutex
	blobs       map[string][]byte
	meta        map[string]json.RawMessage
	othersLease bool
	leases      int
	gets        int // GetMeta calls
	putMeta     chan string
}

func newFakeTier() *fakeTier {
	return &fakeTier{blobs: map[string][]byte{}, meta: map[string]json.RawMessage{}, putMeta: make(chan string, 16)}
}

func (t *fakeTier) OpenArchive(_ context.Context, sha string) (io.ReadCloser, int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b, ok := t.blobs[sha]
	if !ok {
		return nil, 0, nil
	}
	return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
}

func (t *fakeTier) PutArchive(_ context.Context, sha string, r io.ReadSeeker, _ int64) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.blobs[sha] = b
	return nil
}

func (t *fakeTier) TryLease(context.Context, string) (Lease, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.othersLease {
		return nil, nil
	}
	t.leases++
	return fakeLease{}, nil
}

func (t *fakeTier) GetMeta(_ context.Context, key string) (json.RawMessage, time.Time, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gets++
	return t.meta[key], time.Unix(1, 0), nil
}

func (t *fakeTier) PutMeta(_ context.Context, key string, record any) error {
	raw, err := json.Marshal(record)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.meta[key] = raw
	t.mu.Unlock()
	t.putMeta <- key
	return nil
}

type fakeLease struct{}

func (fakeLease) Keep(ctx context.Context) error { <-ctx.Done(); return nil }
func (fakeLease) Release(context.Context) error  { return nil }

type noMetrics struct{}

func (noMetrics) VerificationFailed(string) {}
func (noMetrics) CacheWriteFailed()         {}

func newShared(t *testing.T, tier Tier, offline bool) (*Shared, *lifetime.Lifetime) {
	t.Helper()
	// The cache opened here, not through a test rig of the engine: the
	// engine's fetcher takes this package as a field.
	store, err := cache.Open(cache.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return newSharedOn(t, tier, store, offline)
}

// newSharedOn is newShared over store.
func newSharedOn(t *testing.T, tier Tier, store *cache.Store, offline bool) (*Shared, *lifetime.Lifetime) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	life := lifetime.New(time.Minute, nil, nil)
	s, err := New(Config{Offline: offline, Timeout: time.Minute, Now: time.Now}, tier, life, stored.New(store, log), store, log, noMetrics{})
	if err != nil {
		t.Fatal(err)
	}
	return s, life
}

const sha = "0000000000000000000000000000000000000000000000000000000000000001"

// Without a tier, every use finds nothing and asks nothing.
func TestNoTierFindsNothing(t *testing.T) {
	s, _ := newShared(t, nil, false)
	if s.On() {
		t.Error("On without a tier")
	}
	var v struct{}
	if _, _, err := s.Get(t.Context(), "key", &v); err == nil {
		t.Error("Get found a record without a tier")
	}
	s.Put("key", v)
	if release, err := s.TryLease(t.Context(), sha); release != nil || err != nil {
		t.Errorf("TryLease without a tier: %v, %v", release != nil, err)
	}
	if body, _, release, err := s.Archive(t.Context(), sha, "", "a.zip", nil); body != nil || release != nil || err != nil {
		t.Errorf("Archive without a tier: body %v, lease %v, %v", body != nil, release != nil, err)
	}
	if _, _, ok := s.Versions(t.Context(), "versions/key"); ok {
		t.Error("Versions found a list without a tier")
	}
}

// An archive whose copy in the tier was found wrong is not read from the
// tier again, nor downloaded under its lease: the origin gives it.
func TestDistrustedArchiveIsNotRead(t *testing.T) {
	tier := newFakeTier()
	tier.blobs[sha] = []byte("archive")
	s, _ := newShared(t, tier, false)
	body, size, release, err := s.Archive(t.Context(), sha, "", "a.zip", nil)
	if err != nil || body == nil || size != 7 || release != nil {
		t.Fatalf("Archive of a held archive: body %v, size %d, lease %v, %v", body != nil, size, release != nil, err)
	}
	body.Close()
	s.Distrust(sha)
	if s.Trusts(sha) {
		t.Error("Trusts after Distrust")
	}
	body, _, release, err = s.Archive(t.Context(), sha, "", "a.zip", nil)
	if body != nil || release != nil || err != nil {
		t.Errorf("Archive of a distrusted archive: body %v, lease %v, %v", body != nil, release != nil, err)
	}
	if tier.leases != 0 {
		t.Errorf("%d leases taken for a distrusted archive", tier.leases)
	}
}

// An archive the tier lacks is downloaded under the tier's lease; while
// another replica holds it, the caller waits for the archive to appear,
// until its context ends. A sealed mirror takes no lease.
func TestArchiveUnderTheLease(t *testing.T) {
	t.Run("lease taken", func(t *testing.T) {
		tier := newFakeTier()
		s, _ := newShared(t, tier, false)
		body, _, release, err := s.Archive(t.Context(), sha, "", "a.zip", nil)
		if body != nil || release == nil || err != nil {
			t.Fatalf("Archive of a missing archive: body %v, lease %v, %v", body != nil, release != nil, err)
		}
		release(t.Context())
	})
	t.Run("another replica downloads it", func(t *testing.T) {
		tier := newFakeTier()
		tier.othersLease = true
		s, _ := newShared(t, tier, false)
		waits := 0
		body, _, release, err := s.Archive(t.Context(), sha, "", "a.zip", func() {
			waits++
			if waits == 2 {
				tier.mu.Lock()
				tier.blobs[sha] = []byte("archive")
				tier.mu.Unlock()
			}
		})
		if body == nil || release != nil || err != nil {
			t.Fatalf("Archive once another replica stored it: body %v, lease %v, %v", body != nil, release != nil, err)
		}
		body.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 3*PollMin)
		defer cancel()
		if _, _, _, err := s.Archive(ctx, "0000000000000000000000000000000000000000000000000000000000000002", "", "b.zip", nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Archive while another replica holds the lease: %v, want the context's end", err)
		}
	})
	t.Run("sealed", func(t *testing.T) {
		tier := newFakeTier()
		s, _ := newShared(t, tier, true)
		if body, _, release, err := s.Archive(t.Context(), sha, "", "a.zip", nil); body != nil || release != nil || err != nil {
			t.Errorf("Archive sealed: body %v, lease %v, %v", body != nil, release != nil, err)
		}
		if tier.leases != 0 {
			t.Errorf("a sealed mirror took %d leases", tier.leases)
		}
	})
}

// A record is put in the tier in the background, as work of the engine's
// lifetime; once the lifetime stops, nothing more is put.
func TestPutIsWorkOfTheLifetime(t *testing.T) {
	tier := newFakeTier()
	s, life := newShared(t, tier, false)
	s.Put("k1", map[string]int{"a": 1})
	if err := life.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case key := <-tier.putMeta:
		if key != "k1" {
			t.Errorf("put %q, want k1", key)
		}
	default:
		t.Fatal("the record was not put before the lifetime was idle")
	}
	var got map[string]int
	if _, _, err := s.Get(t.Context(), "k1", &got); err != nil || got["a"] != 1 {
		t.Errorf("Get after Put: %v, %v", got, err)
	}
	life.Stop()
	s.Put("k2", 2)
	select {
	case key := <-tier.putMeta:
		t.Errorf("put %q after the lifetime stopped", key)
	case <-time.After(20 * time.Millisecond):
	}
}

// A record is read in one line of calls: the cache's when it has one,
// without asking the tier; else the tier's, said to come from there and
// not stored in the cache.
func TestGetReadsTheCacheThenTheTier(t *testing.T) {
	tier := newFakeTier()
	tier.meta["k"] = json.RawMessage(`{"a":2}`)
	s, _ := newShared(t, tier, false)
	var got map[string]int
	at, src, err := s.Get(t.Context(), "k", &got)
	if err != nil || src != records.Shared || got["a"] != 2 || !at.Equal(time.Unix(1, 0)) {
		t.Fatalf("Get of the tier's record: %v from %v at %v, %v", got, src, at, err)
	}
	if _, _, err := s.recs.Get(t.Context(), "k", &map[string]int{}); !errors.Is(err, cache.ErrNotFound) {
		t.Errorf("the tier's record was stored in the cache: %v", err)
	}
	if err := s.recs.Put("k", map[string]int{"a": 3}); err != nil {
		t.Fatal(err)
	}
	before := tier.gets
	got = nil
	if _, src, err := s.Get(t.Context(), "k", &got); err != nil || src != records.Hit || got["a"] != 3 {
		t.Fatalf("Get of the cache's record: %v from %v, %v", got, src, err)
	}
	if tier.gets != before {
		t.Errorf("the tier was asked for a record the cache has")
	}
	if _, _, err := s.Get(t.Context(), "none", &got); !errors.Is(err, cache.ErrNotFound) {
		t.Errorf("Get of a record neither has: %v, want cache.ErrNotFound", err)
	}
}

// downTier is a tier whose record reads fail.
type downTier struct{ *fakeTier }

func (downTier) GetMeta(context.Context, string) (json.RawMessage, time.Time, error) {
	return nil, time.Time{}, errors.New("dial tcp: connection refused")
}

// A record that neither the cache nor the tier has is not found; one the
// tier failed to answer for is not found either (callers that take the
// answer as it is go on without the tier), and said to be unanswered, so
// that a caller can tell the two apart and ask again later.
func TestGetTellsAFailingTierFromOneWithoutTheRecord(t *testing.T) {
	s, _ := newShared(t, newFakeTier(), false)
	if _, _, err := s.Get(t.Context(), "none", new(map[string]int)); !errors.Is(err, cache.ErrNotFound) || errors.Is(err, stored.ErrUnanswered) {
		t.Errorf("Get of a record the tier answers it has not: %v, want cache.ErrNotFound alone", err)
	}
	down, _ := newShared(t, downTier{newFakeTier()}, false)
	if _, _, err := down.Get(t.Context(), "none", new(map[string]int)); !errors.Is(err, cache.ErrNotFound) || !errors.Is(err, stored.ErrUnanswered) {
		t.Errorf("Get with the tier failing: %v, want cache.ErrNotFound and stored.ErrUnanswered", err)
	}
}

// A package record is written to the cache as it is and to the tier
// without the withheld import set aside in it (imports stay local); the
// caller's record is not changed.
func TestPutKeepsImportsLocal(t *testing.T) {
	tier := newFakeTier()
	s, life := newShared(t, tier, false)
	rec := &records.PackageRecord{Schema: records.Schema, Withheld: &records.PackageRecord{Schema: records.Schema, Provenance: records.ProvenanceUnsigned}}
	if err := s.Put("package/k", rec); err != nil {
		t.Fatal(err)
	}
	if err := life.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if rec.Withheld == nil {
		t.Error("Put changed the caller's record")
	}
	var local records.PackageRecord
	if _, src, err := s.Get(t.Context(), "package/k", &local); err != nil || src != records.Hit || local.Withheld == nil {
		t.Errorf("the cache's record: withheld %v, from %v, %v", local.Withheld != nil, src, err)
	}
	if strings.Contains(string(tier.meta["package/k"]), "withheld") || tier.meta["package/k"] == nil {
		t.Errorf("the tier's record: %s", tier.meta["package/k"])
	}
}

// Newest takes the listing taken last, whichever store has it.
func TestNewestTakesTheLaterListing(t *testing.T) {
	early, late := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name        string
		local, tier time.Time
		want        time.Time
	}{
		{"the tier's is later", early, late, late},
		{"the cache's is later", late, early, late},
		{"the cache's alone", late, time.Time{}, late},
		{"the tier's alone", time.Time{}, early, early},
	} {
		t.Run(c.name, func(t *testing.T) {
			tier := newFakeTier()
			s, _ := newShared(t, tier, false)
			if !c.tier.IsZero() {
				raw, _ := json.Marshal(&records.VersionList{Schema: records.Schema, ListedAt: c.tier})
				tier.meta["versions/k"] = raw
			}
			if !c.local.IsZero() {
				if err := s.recs.Put("versions/k", &records.VersionList{Schema: records.Schema, ListedAt: c.local}); err != nil {
					t.Fatal(err)
				}
			}
			v, at, ok := s.Newest(t.Context(), "versions/k", new(records.VersionList))
			if !ok || !at.Equal(c.want) || !v.(*records.VersionList).ListedAt.Equal(c.want) {
				t.Errorf("Newest: %v, %v, want %v", at, ok, c.want)
			}
		})
	}
}

// newSharedHolderWait is newShared with a bound on the wait for another
// replica's lease.
func newSharedHolderWait(t *testing.T, tier Tier, wait time.Duration) *Shared {
	t.Helper()
	store, err := cache.Open(cache.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	log := slog.New(slog.DiscardHandler)
	s, err := New(Config{Timeout: time.Minute, Now: time.Now, HolderWait: wait}, tier, lifetime.New(time.Minute, nil, nil), stored.New(store, log), store, log, noMetrics{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A lease that is never let go (a replica stuck while renewing it, or a
// lease object a writer of the bucket keeps putting back) holds a
// download back for HolderWait at most: then the replica downloads the
// archive itself, as without a tier, and does not fail the request.
func TestArchiveHolderWaitBounded(t *testing.T) {
	tier := newFakeTier()
	tier.othersLease = true
	s := newSharedHolderWait(t, tier, 300*time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	body, _, release, err := s.Archive(ctx, sha, "", "a.zip", nil)
	if body != nil || release != nil || err != nil {
		t.Fatalf("Archive under a lease held forever: body %v, lease %v, %v; want to download it without the lease", body != nil, release != nil, err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 5*time.Second {
		t.Errorf("waited %v for the lease, want about 300ms", d)
	}
}

// The same bound holds for a module package another replica's lease
// holds: the package is fetched from its source.
func TestFetchModuleHolderWaitBounded(t *testing.T) {
	tier := newFakeTier()
	tier.othersLease = true
	s := newSharedHolderWait(t, tier, 300*time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	fetched := 0
	rec := records.ModuleRecord{Schema: records.Schema, Module: "example.com/acme/net/aws", Version: "1.0.0"}
	got, err := s.FetchModule(ctx, addrs.Module{}, "module/k", rec, 1<<20, func(context.Context, records.ModuleRecord) (*records.ModuleRecord, error) {
		fetched++
		return &rec, nil
	})
	if err != nil || got == nil || fetched != 1 {
		t.Fatalf("FetchModule under a lease held forever: %v, %v, %d fetches; want one fetch from the source", got, err, fetched)
	}
}

// failingTier is a tier whose archive reads fail with err.
type failingTier struct {
	*fakeTier
	err error
}

func (t failingTier) OpenArchive(context.Context, string) (io.ReadCloser, int64, error) {
	return nil, 0, t.err
}

func (t failingTier) PutMeta(context.Context, string, any) error { return t.err }

// A failing store is a WARN line per failed call, the replica going on
// without it; while its circuit breaker is open (ErrUnavailable, which
// the store logs once as it opens) the calls it refuses are debug lines,
// so that an outage of the bucket is not a WARN line per request, nor
// per record the cache stores.
func TestFailuresWhileTheStoreIsDownLoggedAtDebug(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		warn bool
	}{
		{"failing", errors.New("dial tcp: connection refused"), true},
		{"breaker open", fmt.Errorf("%w: %w", sharedstore.ErrUnavailable, errors.New("dial tcp: connection refused")), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logged bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
			store, err := cache.Open(cache.Options{InMemory: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { store.Close() })
			s, err := New(Config{Timeout: time.Minute, Now: time.Now}, failingTier{newFakeTier(), c.err}, lifetime.New(time.Minute, nil, nil), stored.New(store, log), store, log, noMetrics{})
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if body, _, _, err := s.Archive(t.Context(), sha, "", "a.zip", nil); body != nil || err != nil {
					t.Fatalf("Archive with the store failing: body %v, %v; want nothing, to fetch from the origin", body != nil, err)
				}
			}
			warns, debugs := strings.Count(logged.String(), "level=WARN msg=\"shared store failed"), strings.Count(logged.String(), "level=DEBUG msg=\"shared store failed")
			if c.warn && (warns != 3 || debugs != 0) || !c.warn && (warns != 0 || debugs != 3) {
				t.Errorf("%d WARN and %d DEBUG lines for 3 failed reads, want them at %s:\n%s", warns, debugs, map[bool]string{true: "WARN", false: "DEBUG"}[c.warn], logged.String())
			}
			// So with the records each new one in the cache shares.
			logged.Reset()
			for i := range 3 {
				s.Share(fmt.Sprintf("provider/record-%d", i), map[string]int{"n": i})
			}
			if err := s.life.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			warns, debugs = strings.Count(logged.String(), "level=WARN msg=\"record not stored in the shared store"), strings.Count(logged.String(), "level=DEBUG msg=\"record not stored in the shared store")
			if c.warn && (warns != 3 || debugs != 0) || !c.warn && (warns != 0 || debugs != 3) {
				t.Errorf("%d WARN and %d DEBUG lines for 3 failed writes, want them at %s:\n%s", warns, debugs, map[bool]string{true: "WARN", false: "DEBUG"}[c.warn], logged.String())
			}
		})
	}
}

// keyedTier is a fakeTier whose leases are held by id, each once.
type keyedTier struct {
	*fakeTier
	held map[string]bool
}

func (t *keyedTier) TryLease(_ context.Context, id string) (Lease, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held[id] {
		return nil, nil
	}
	t.held[id] = true
	return fakeLease{}, nil
}

// A replica downloading an archive for one provider (a stranger's, whose
// signed SHA256SUMS names the sha256 of another provider's archive with a
// download URL of its own, which may stall) holds the tier's lease for
// that provider alone: another replica downloading the same sha256 for
// the provider it belongs to takes a lease of its own at once, where it
// waited for the stranger's download for HolderWait; one for the same
// provider waits, as before.
func TestArchiveLeaseIsTheProvidersOwn(t *testing.T) {
	const stranger, owner = "registry.example/stranger/random", "registry.terraform.io/hashicorp/random"
	tier := &keyedTier{fakeTier: newFakeTier(), held: map[string]bool{}}
	a := newSharedHolderWait(t, tier, time.Minute)
	b := newSharedHolderWait(t, tier, 200*time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, _, release, err := a.Archive(ctx, sha, stranger, "a.zip", nil); release == nil || err != nil {
		t.Fatalf("replica a took no lease: %v", err)
	}
	start := time.Now()
	if _, _, release, err := b.Archive(ctx, sha, owner, "a.zip", nil); release == nil || err != nil {
		t.Fatalf("replica b, for %s, took no lease of its own (waited %v): %v", owner, time.Since(start), err)
	}
	if _, _, release, err := b.Archive(ctx, sha, stranger, "a.zip", nil); release != nil || err != nil {
		t.Fatalf("replica b, for %s, took a lease a holds: %v", stranger, err)
	}
	other := strings.Repeat("b", 64)
	if LeaseID(sha, "") != sha || LeaseID(sha, owner) == sha || LeaseID(sha, owner) == LeaseID(sha, stranger) || LeaseID(sha, owner) == LeaseID(other, owner) {
		t.Error("LeaseID: the sha256 without an owner, one of its own for each provider and archive")
	}
}
