package sharedtier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/stored"
)

// testClock is a clock the test moves.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newSealed is a sealed replica's Shared on tier, on a cache of its own,
// with clock.
func newSealed(t *testing.T, tier Tier, clock *testClock) *Shared {
	t.Helper()
	store, err := cache.Open(cache.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	log := slog.New(slog.DiscardHandler)
	s, err := New(Config{Offline: true, Timeout: time.Minute, Now: clock.Now}, tier, lifetime.New(time.Minute, nil, nil), stored.New(store, log), store, log, noMetrics{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// versionList is a version list of vs listed at listed.
func versionList(listed time.Time, vs ...string) *records.VersionList {
	l := &records.VersionList{Schema: records.Schema, ListedAt: listed, Dates: map[string]time.Time{}}
	for _, v := range vs {
		l.Versions = append(l.Versions, records.VersionEntry{Version: v, Platforms: []string{"linux_amd64"}})
	}
	return l
}

// putTier stores list as the tier's under key.
func putTier(t *testing.T, tier *fakeTier, key string, list *records.VersionList) {
	t.Helper()
	raw, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	tier.mu.Lock()
	tier.meta[key] = raw
	tier.mu.Unlock()
}

// A sealed replica whose cache holds a list of its own serves the tier's
// where it was listed later (the connected replicas listed the origin
// since), taken from the tier at most once per key in SeenTTL: a warm
// lookup asks the tier nothing, and an unchanged list taken again leaves
// the answers stamped before holding (the memo's generation unchanged);
// a later list of the tier's is taken once SeenTTL has passed.
func TestSealedVersionsTakeTheTiersLaterListOncePerSeenTTL(t *testing.T) {
	const key = "versions/example.com/ns/p"
	early := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := &testClock{now: early.Add(24 * time.Hour)}
	tier := newFakeTier()
	s := newSealed(t, tier, clock)
	if err := s.recs.Put(key, versionList(early, "1.0.0")); err != nil {
		t.Fatal(err)
	}
	putTier(t, tier, key, versionList(early.Add(time.Hour), "1.0.0", "1.1.0"))

	lookup := func(what string, want ...string) *records.VersionList {
		t.Helper()
		list, _, ok := s.Versions(t.Context(), key)
		if !ok || !slices.Equal(list.Names(), want) {
			t.Fatalf("%s: %v (%v), want %v", what, list.Names(), ok, want)
		}
		return list
	}
	gets := func() int { tier.mu.Lock(); defer tier.mu.Unlock(); return tier.gets }

	first := lookup("the tier's later listing", "1.0.0", "1.1.0")
	gen, asked := s.recs.Generation(), gets()
	for range 10 {
		clock.Add(SeenTTL / 20)
		lookup("warm", "1.0.0", "1.1.0")
	}
	if n := gets() - asked; n != 0 {
		t.Errorf("10 warm lookups within SeenTTL asked the tier %d times, want none", n)
	}
	clock.Add(SeenTTL)
	if again := lookup("the same lists, SeenTTL later", "1.0.0", "1.1.0"); again != first || s.recs.Generation() != gen {
		t.Error("the same lists taken again changed what the memo answers")
	}
	if n := gets() - asked; n != 1 {
		t.Errorf("the tier was asked %d times after SeenTTL, want once", n)
	}

	putTier(t, tier, key, versionList(early.Add(2*time.Hour), "1.0.0", "1.1.0", "1.2.0"))
	lookup("within SeenTTL of the last look", "1.0.0", "1.1.0")
	clock.Add(SeenTTL)
	lookup("SeenTTL later", "1.0.0", "1.1.0", "1.2.0")
	if s.recs.Generation() == gen {
		t.Error("the memo's generation did not advance when the list served changed")
	}
}

// A sealed replica whose cache's list is the later listing serves it;
// with the tier failing, its own list too, and a removal's read of the
// list served fails (ServedVersions: the tier's list, later, might
// list the version again).
func TestSealedVersionsOwnListLaterOrTierFailing(t *testing.T) {
	const key = "versions/example.com/ns/p"
	early := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := &testClock{now: early.Add(24 * time.Hour)}
	tier := newFakeTier()
	s := newSealed(t, tier, clock)
	if err := s.recs.Put(key, versionList(early.Add(time.Hour), "1.0.0", "1.2.0")); err != nil {
		t.Fatal(err)
	}
	putTier(t, tier, key, versionList(early, "1.0.0", "1.1.0"))
	if list, _, ok := s.Versions(t.Context(), key); !ok || !slices.Equal(list.Names(), []string{"1.0.0", "1.2.0"}) {
		t.Errorf("the cache's later listing: %v, want [1.0.0 1.2.0]", list.Names())
	}
	if list, _, own, err := s.ServedVersions(t.Context(), key); err != nil || !own || !slices.Equal(list.Names(), []string{"1.0.0", "1.2.0"}) {
		t.Errorf("ServedVersions: %v, own %v, %v; want the cache's, [1.0.0 1.2.0]", list.Names(), own, err)
	}

	down := newSealed(t, downTier{newFakeTier()}, clock)
	if err := down.recs.Put(key, versionList(early, "1.0.0")); err != nil {
		t.Fatal(err)
	}
	if list, _, ok := down.Versions(t.Context(), key); !ok || !slices.Equal(list.Names(), []string{"1.0.0"}) {
		t.Errorf("with the tier failing: %v, want the cache's, [1.0.0]", list.Names())
	}
	if _, _, _, err := down.ServedVersions(t.Context(), key); !errors.Is(err, stored.ErrUnanswered) {
		t.Errorf("ServedVersions with the tier failing: %v, want stored.ErrUnanswered", err)
	}
}

// The later listing of the tier's keeps what imports added to the
// cache's list that it does not list (every version of a list an import
// made from nothing), as versions an import added to it; and dates the
// versions it names that the cache's listing did not and that it does
// not date by the time of the cache's listing, which lacked them.
func TestLaterListingKeepsImportsAndDatesWhatItAdds(t *testing.T) {
	early := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	late, dated := early.Add(time.Hour), early.Add(-time.Hour)
	theirs := versionList(late, "1.0.0", "1.1.0", "1.3.0")
	theirs.Dates["1.3.0"] = dated

	own := versionList(early, "1.0.0", "1.2.0")
	own.ImportAdded = []string{"1.2.0"}
	got := laterListing(theirs, late, own, early)
	if want := []string{"1.0.0", "1.1.0", "1.2.0", "1.3.0"}; !slices.Equal(got.Names(), want) || !slices.Equal(got.ImportAdded, []string{"1.2.0"}) || !got.ListedAt.Equal(late) {
		t.Errorf("versions %v, import added %v, listed at %v; want %v, [1.2.0], %v", got.Names(), got.ImportAdded, got.ListedAt, want, late)
	}
	if !got.Dates["1.1.0"].Equal(early) || !got.Dates["1.3.0"].Equal(dated) || !got.Dates["1.0.0"].IsZero() {
		t.Errorf("dates %v, want 1.1.0 at the cache's listing, 1.3.0 as the tier's list dates it, 1.0.0 undated", got.Dates)
	}
	if len(theirs.Dates) != 1 || len(theirs.Versions) != 3 {
		t.Error("the tier's list was changed")
	}

	alone := &records.VersionList{Schema: records.Schema, ImportOnly: true, Imported: true,
		Versions: []records.VersionEntry{{Version: "1.5.0", Platforms: []string{"linux_amd64"}}}}
	got = laterListing(theirs, late, alone, early)
	if want := []string{"1.0.0", "1.1.0", "1.3.0", "1.5.0"}; !slices.Equal(got.Names(), want) || !slices.Equal(got.ImportAdded, []string{"1.5.0"}) || len(got.Dates) != 1 {
		t.Errorf("over an import's list alone: versions %v, import added %v, dates %v; want %v, [1.5.0], the tier's", got.Names(), got.ImportAdded, got.Dates, want)
	}
}

// A sealed replica asked for a provider neither its cache nor the tier
// has a version list of asks the tier once per SeenTTL, not on every
// request; a list an import writes in the cache meanwhile is served at
// once, and a list the tier takes is served once SeenTTL has passed.
// Asked for more such providers than it remembers, it still answers
// the lists it took from the memo, asking the tier nothing.
func TestSealedVersionsNoListAskedOncePerSeenTTL(t *testing.T) {
	const key = "versions/example.com/ns/p"
	early := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := &testClock{now: early.Add(24 * time.Hour)}
	tier := newFakeTier()
	s := newSealed(t, tier, clock)
	gets := func() int { tier.mu.Lock(); defer tier.mu.Unlock(); return tier.gets }

	for range 10 {
		if list, _, ok := s.Versions(t.Context(), key); ok || list != nil {
			t.Fatalf("a list where neither store has one: %v", list.Names())
		}
		clock.Add(SeenTTL / 20)
	}
	if n := gets(); n != 1 {
		t.Errorf("10 lookups of a list no store has within SeenTTL asked the tier %d times, want once", n)
	}
	putTier(t, tier, key, versionList(early, "1.0.0"))
	clock.Add(SeenTTL)
	if list, _, ok := s.Versions(t.Context(), key); !ok || !slices.Equal(list.Names(), []string{"1.0.0"}) {
		t.Errorf("the tier's list, taken SeenTTL later: %v, %v; want [1.0.0]", list.Names(), ok)
	}

	const other = "versions/example.com/ns/q"
	if _, _, ok := s.Versions(t.Context(), other); ok {
		t.Fatal("a list where neither store has one")
	}
	imported := versionList(time.Time{}, "2.0.0")
	imported.ImportOnly, imported.Imported = true, true
	if err := s.recs.Put(other, imported); err != nil {
		t.Fatal(err)
	}
	if list, _, ok := s.Versions(t.Context(), other); !ok || !slices.Equal(list.Names(), []string{"2.0.0"}) {
		t.Errorf("the cache's list an import wrote: %v, %v; want [2.0.0] at once", list.Names(), ok)
	}

	asked := gets()
	for i := range seenMax {
		s.Versions(t.Context(), fmt.Sprintf("versions/example.com/ns/none%d", i))
	}
	if gets()-asked != seenMax {
		t.Fatalf("the tier was asked %d times for %d providers it has no list of, want once each", gets()-asked, seenMax)
	}
	asked = gets()
	if list, _, ok := s.Versions(t.Context(), key); !ok || !slices.Equal(list.Names(), []string{"1.0.0"}) || gets() != asked {
		t.Errorf("the list taken, within SeenTTL: %v, %v, and the tier asked %d times; want [1.0.0] from the memo", list.Names(), ok, gets()-asked)
	}
}

// barrierTier is a tier whose first reads wait until wg is done (each
// of them marking it done once), so that they overlap.
type barrierTier struct {
	*fakeTier
	wg      *sync.WaitGroup
	waiting *atomic.Int64 // the reads still to wait
}

func (b barrierTier) GetMeta(ctx context.Context, key string) (json.RawMessage, time.Time, error) {
	if b.waiting.Add(-1) >= 0 {
		b.wg.Done()
		b.wg.Wait()
	}
	return b.fakeTier.GetMeta(ctx, key)
}

// A sealed replica asked for several providers at once, on a cold memo,
// asks the tier for each list once: the lists taken at the same time are
// all answered from the memo within SeenTTL, rather than one each time
// and the others taken again on their next lookups.
func TestSealedVersionsTakenAtOnceAskedOnce(t *testing.T) {
	const n = 4
	early := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := &testClock{now: early.Add(24 * time.Hour)}
	tier := newFakeTier()
	var wg sync.WaitGroup
	var waiting atomic.Int64
	wg.Add(n)
	waiting.Store(n)
	s := newSealed(t, barrierTier{tier, &wg, &waiting}, clock)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("versions/example.com/ns/p%d", i)
		putTier(t, tier, keys[i], versionList(early, "1.0.0"))
	}
	gets := func() int { tier.mu.Lock(); defer tier.mu.Unlock(); return tier.gets }
	var taken sync.WaitGroup
	for _, key := range keys {
		taken.Go(func() {
			if _, _, ok := s.Versions(t.Context(), key); !ok {
				t.Errorf("%s: no list", key)
			}
		})
	}
	taken.Wait()
	asked := gets()
	for _, key := range keys {
		if list, _, ok := s.Versions(t.Context(), key); !ok || !slices.Equal(list.Names(), []string{"1.0.0"}) {
			t.Errorf("%s: %v, %v; want [1.0.0]", key, list.Names(), ok)
		}
	}
	if n := gets() - asked; n != 0 {
		t.Errorf("the lists taken at once were asked of the tier %d more times within SeenTTL, want none", n)
	}
}
