package gate_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
)

// readsDownTier is an outageTier whose reads fail while readsDown is
// set, its writes going through (a blip: the reads of a listing failed,
// the list written in the background a moment later went through).
type readsDownTier struct {
	outageTier
	readsDown *atomic.Bool
}

func (o readsDownTier) GetMeta(ctx context.Context, key string) (json.RawMessage, time.Time, error) {
	if o.readsDown.Load() {
		return nil, time.Time{}, errNoAnswer
	}
	return o.outageTier.GetMeta(ctx, key)
}

// A module of 301 minor version lines; a lists it, then again with
// 1.10.1 (not among the 256 a first listing looks up) published since,
// which a dates. Replica b starts with an empty cache and lists while the
// bucket fails its reads (no list before its own, no record answered:
// its listing is blind, and marked) but takes the write of its list,
// which therefore dates nothing (as a list of an earlier release), not
// an empty dating that would pass for one of all it names. Replica c
// starts with an empty cache and lists, taking b's list as the one
// before its own: it looks up every record, 1.10.1's among them (not
// among the 256 a list that dates would have it look up), and holds it.
func TestReleaseAgeBlindListDatesNothing(t *testing.T) {
	r := newLongListing(t)

	var readsDown atomic.Bool
	cfg := r.cfg("b")
	cfg.Shared = readsDownTier{cfg.Shared.(outageTier), &readsDown}
	readsDown.Store(true)
	b := r.replica(t, cfg)
	r.listAt(b)
	readsDown.Store(false)

	c := r.replica(t, r.cfg("c"))
	r.listAt(c)
	heldOnEach(t, r, "1.10.1", r.first, map[string]*harness.Harness{"a": r.a, "c": c})
}

// Replica x lists 1.0.0 (the first listing); three days later replica
// b, with an empty cache, lists (x's list before its own), and again
// with 1.1.0 published since: b dates 1.1.0 by its own listing three
// days after x's, and writes that record and its list. x lists again
// while the bucket fails its reads (its own list, three days old, is the
// one before: 1.1.0 dated by it) but takes its writes: x keeps its
// dating of 1.1.0, three days earlier, in its cache alone, since the
// bucket did not answer whether a replica dated it (record writes are
// not conditional), and b's record stays. Replica c, with an empty
// cache, takes b's record (the later of it and x's list's date): 1.1.0
// is not released three days sooner than b dated it.
func TestReleaseAgeUnansweredDatingKeptLocal(t *testing.T) {
	r := newReplicas(t, "module")
	var readsDown atomic.Bool
	cfg := r.cfg("x")
	cfg.Shared = readsDownTier{cfg.Shared.(outageTier), &readsDown}
	x := r.replica(t, cfg)
	r.publish("1.0.0")
	r.listAt(x)
	r.clock.Add(72 * time.Hour)
	b := r.replica(t, r.cfg("b"))
	t2 := r.listAt(b)
	r.publish("1.1.0")
	r.listAt(b)

	readsDown.Store(true)
	r.listAt(x)
	readsDown.Store(false)

	c := r.replica(t, r.cfg("c"))
	r.listAt(c)
	heldOnEach(t, r, "1.1.0", t2, map[string]*harness.Harness{"b": b, "c": c})
}
