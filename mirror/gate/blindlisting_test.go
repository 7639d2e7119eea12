package gate_test

import (
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
)

// A module of 301 minor version lines (0.9.0, 1.0.0 to 1.299.0); replica
// a lists it, then again with 1.10.1 published since (a backport into
// an old line: not among the 256 versions a first listing looks up).
// a dates 1.10.1 by its first listing. Replica b starts with an empty
// cache while the bucket does not answer (its first listing blind), and
// lists again once the bucket answers; replica c starts afterwards with
// an empty cache. Nothing is deleted from the bucket. Every replica
// holds 1.10.1 for the minimum release age from a's first listing: a
// version one replica dated is dated on every replica.
func TestReleaseAgeBlindListingOfALongListingLooksAllUpAgain(t *testing.T) {
	r := newLongListing(t)
	b := r.blindReplica(t, "b")
	r.listAt(b) // the bucket answers again

	c := r.replica(t, r.cfg("c"))
	r.listAt(c)

	heldOnEach(t, r, "1.10.1", r.first, map[string]*harness.Harness{"a": r.a, "b": b, "c": c})
	for name, h := range map[string]*harness.Harness{"a": r.a, "b": b, "c": c} {
		if err := r.verdict(h, "1.0.0"); err != nil {
			t.Errorf("replica %s: 1.0.0, of the first listing: %v, want it served", name, err)
		}
	}
}

// Replica a lists 1.0.0 (the first listing), then 1.1.0; replica b,
// with an empty cache, takes its first listing while the bucket does not
// answer; meanwhile a writer of the bucket deletes a's dating record of
// 1.1.0. The bucket answers again: b lists (its lookup of 1.1.0 finds
// nothing), then a lists again (its list dates 1.1.0), then b lists
// again, taking a's newer list, which dates 1.1.0, as the one before its
// own. b holds 1.1.0 from then on, and so does replica c started with an
// empty cache afterwards.
func TestReleaseAgeAnotherReplicasLaterListDatesABlindFirstListing(t *testing.T) {
	for _, kind := range []string{"provider", "module"} {
		t.Run(kind, func(t *testing.T) {
			r := newListedTwice(t, kind)
			b := r.blindReplica(t, "b")
			r.deleteRecord(t, r.datingKey("1.1.0"))
			r.listAt(b)
			r.listAt(r.a)
			r.listAt(b)

			c := r.replica(t, r.cfg("c"))
			r.listAt(c)

			heldOnEach(t, r, "1.1.0", r.first, map[string]*harness.Harness{"a": r.a, "b": b, "c": c})
		})
	}
}

// heldOnEach puts a minimum release age of 168h in force on each replica
// and checks it holds version v until 168h after first.
func heldOnEach(t *testing.T, r *replicas, v string, first time.Time, each map[string]*harness.Harness) {
	t.Helper()
	pol := enginetest.DecodePolicy(t, `minimum_release_age = "168h"`)
	for name, h := range each {
		h.Engine.SetPolicy(pol)
		heldUntil(t, "replica "+name+": "+v, r.verdict(h, v), first.Add(168*time.Hour))
	}
}
