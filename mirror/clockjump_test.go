package mirror

import (
	"context"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// A version list stored while the clock was far ahead (it was set a month
// forward, then back) is not fresh until the clock catches up with it: it
// is refreshed once its TTL would have run out, and the versions the
// origin added since are seen.
func TestListStoredInTheFutureIsRefreshed(t *testing.T) {
	t.Parallel()
	// The cache stamps lists with the real time: an engine clock a month
	// behind is a clock set back after the list was stored.
	clock := enginetest.NewFakeClock()
	clock.Add(-30 * 24 * time.Hour)
	h := newHarness(t, harnessOptions{cfg: Config{VersionsTTL: 10 * time.Minute, Now: clock.Now}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	if st := h.listState(); !st.Fetched {
		t.Fatal("the first list was not fetched")
	}
	h.origin.AddProvider(ns, typ, []string{"1.0.0", "2.0.0"}, platforms)
	clock.Add(11 * time.Minute)
	hits := h.origin.Hits(fakeorigin.Versions)
	list, st, err := h.engine.Versions(context.Background(), h.provider())
	if err != nil {
		t.Fatal(err)
	}
	if !st.Fetched || h.origin.Hits(fakeorigin.Versions) == hits {
		t.Fatalf("a list dated a month ahead is still fresh after its TTL (stored at %v, now %v)", st.StoredAt, clock.Now())
	}
	if len(list.Versions) != 2 {
		t.Errorf("%d versions, want the 2 the origin lists now", len(list.Versions))
	}
}

// A warm answer made while the clock was far ahead (it was set a month
// forward, then back) is not reused once the clock is back: the call is
// made again, refreshes the list, which the engine no longer takes as
// fresh, and sees the versions the origin added since.
func TestAnswerMadeInTheFutureIsNotReused(t *testing.T) {
	t.Parallel()
	clock := enginetest.NewFakeClock()
	h := newHarness(t, harnessOptions{cfg: Config{VersionsTTL: 10 * time.Minute, Now: clock.Now}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	if st := h.listState(); !st.Fetched {
		t.Fatal("the first list was not fetched")
	}
	st := h.listState()
	if !h.engine.Reuse(st.Stamp) {
		t.Fatal("a cached list is not reusable")
	}
	h.origin.AddProvider(ns, typ, []string{"1.0.0", "2.0.0"}, platforms)
	clock.Add(-30 * 24 * time.Hour)
	if h.engine.Reuse(st.Stamp) {
		t.Fatalf("an answer of a list stored at %v is reused at %v, a month earlier", st.StoredAt, clock.Now())
	}
	list, st, err := h.engine.Versions(context.Background(), h.provider())
	if err != nil {
		t.Fatal(err)
	}
	if !st.Fetched || len(list.Versions) != 2 {
		t.Errorf("fetched %v, %d versions; want the 2 the origin lists now", st.Fetched, len(list.Versions))
	}
}
