package mirror

import (
	"slices"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/heldpoint"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// heldLookupMetrics holds (heldpoint) the first miss of a kind's cache
// lookup after Arm, having said so on Reached, until GoOn: a caller
// held between reading the list the cache holds and asking the origin
// for a new one.
type heldLookupMetrics struct {
	noMetrics
	kind string

	heldpoint.Point
}

func (m *heldLookupMetrics) CacheLookup(kind string, hit bool) {
	if kind != m.kind || hit {
		return
	}
	m.Pass()
}

// listedAt is an engine whose cache holds the provider's version list
// naming 1.0.0 alone, stored at at, in front of an origin that lists
// 1.0.0 and 1.1.0, its lookups of version lists held by met.
func listedAt(t *testing.T, ttl time.Duration, at time.Time) (*harness, *heldLookupMetrics) {
	t.Helper()
	met := &heldLookupMetrics{kind: "versions"}
	// StaleAfter is long: a held caller waits for its refresh, so
	// that it is never answered the cached list instead.
	h := newHarness(t, harnessOptions{cfg: Config{VersionsTTL: ttl, StaleAfter: time.Minute, Metrics: met}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0", "1.1.0"}, []string{"linux_amd64"})
	listed := &records.VersionList{Schema: records.Schema, ListedAt: at.UTC(), Dates: map[string]time.Time{},
		Versions: []records.VersionEntry{{Version: "1.0.0", Protocols: []string{"5.0"}, Platforms: []string{"linux_amd64"}}}}
	if err := h.store.PutMetaAt(records.VersionsKey(h.provider()), listed, at); err != nil {
		t.Fatal(err)
	}
	return h, met
}

// A caller that found the version list expired, and asks the origin for
// it once another caller's refresh has ended, is answered with the list
// that refresh stored: the origin is not asked again (the refresh looks
// at the stored list before it fetches).
func TestListRefreshedJustBeforeIsNotFetchedAgain(t *testing.T) {
	t.Parallel()
	h, met := listedAt(t, time.Minute, time.Now().Add(-time.Hour))
	ctx := t.Context()

	met.Arm()
	type answer struct {
		names []string
		err   error
	}
	held := make(chan answer, 1)
	go func() {
		list, _, err := h.engine.Versions(ctx, h.provider())
		held <- answer{list.Names(), err}
	}()
	<-met.Reached() // the held caller has read the expired list
	list, _, err := h.engine.Versions(ctx, h.provider())
	if err != nil || !slices.Equal(list.Names(), []string{"1.0.0", "1.1.0"}) {
		t.Fatalf("the caller that refreshed: %v, %v; want the origin's list", list.Names(), err)
	}
	met.GoOn()
	if a := <-held; a.err != nil || !slices.Equal(a.names, []string{"1.0.0", "1.1.0"}) {
		t.Fatalf("the held caller: %v, %v; want the origin's list", a.names, a.err)
	}
	if n := h.origin.Hits(fakeorigin.Versions); n != 1 {
		t.Errorf("the origin was asked for the list %d times, want once", n)
	}
}

// So too for a refresh forced because the list lacks the version asked
// for: a caller held between reading the list and refreshing it is
// answered with the list another caller's forced refresh stored since,
// which names the version, without asking the origin again.
func TestForcedRefreshJustBeforeIsNotFetchedAgain(t *testing.T) {
	t.Parallel()
	// Fresh, but older than MinForcedRefresh: a version it lacks forces
	// a refresh.
	h, met := listedAt(t, time.Hour, time.Now().Add(-10*time.Minute))
	ctx := t.Context()
	v := mustVersion(t, "1.1.0")

	met.Arm()
	held := make(chan error, 1)
	go func() {
		_, err := h.engine.Package(ctx, h.provider(), v, nil)
		held <- err
	}()
	<-met.Reached() // the held caller has read the list, which lacks 1.1.0
	if _, err := h.engine.Package(ctx, h.provider(), v, nil); err != nil {
		t.Fatalf("the caller that refreshed: %v; want 1.1.0's package", err)
	}
	met.GoOn()
	if err := <-held; err != nil {
		t.Fatalf("the held caller: %v; want 1.1.0's package", err)
	}
	if n := h.origin.Hits(fakeorigin.Versions); n != 1 {
		t.Errorf("the origin was asked for the list %d times, want once", n)
	}
}
