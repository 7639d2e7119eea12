package gate_test

import (
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
)

// Replica a lists a provider or a module (1.0.0, the first listing),
// then again with 1.1.0 published since (a provider's signed a year
// ago). Replica b, started with an empty cache while the bucket does not
// answer, finds no list before its own and no dating record: its first
// listing is taken as the first ever (the bootstrap), and 1.1.0 is
// served meanwhile, as by a replica without a bucket. Once the bucket
// answers again, b listing again found 1.1.0 in its own listing and in
// the next, and never took a's dating of it: it served 1.1.0 for good,
// and its lists carried no date of it, so that with a's record deleted
// from the bucket a replica c with an empty cache, taking b's list as
// the one before its own, served it too. b looks the dating records up
// again once the bucket answers: 1.1.0 is held on b, and on c, for the
// minimum release age from a's first listing, and b's next listing asks
// the bucket for no dating record. So too when, while the bucket did not
// answer, a short listing of the origin lacked 1.1.0 (recorded then, on
// b, as a version of the first listing) and the next named it again.
func TestReleaseAgeFirstListingWhileTheBucketDidNotAnswer(t *testing.T) {
	for _, tc := range []struct {
		kind  string
		short bool
	}{{"provider", false}, {"module", false}, {"provider", true}, {"module", true}} {
		name := tc.kind
		if tc.short {
			name += " through a short listing"
		}
		t.Run(name, func(t *testing.T) {
			r := newListedTwice(t, tc.kind)

			pol := enginetest.DecodePolicy(t, `minimum_release_age = "168h"`)
			r.down.Store(true)
			b := r.replica(t, r.cfg("b"))
			r.listAt(b)
			b.Engine.SetPolicy(pol)
			if err := r.verdict(b, "1.1.0"); err != nil {
				t.Errorf("replica b, its first listing taken while the bucket did not answer: 1.1.0: %v, want it served meanwhile", err)
			}
			b.WaitIdle()
			if tc.short {
				r.withdraw("1.1.0")
				r.listAt(b)
				r.publish("1.1.0")
			}

			r.down.Store(false)
			r.listAt(b)
			heldUntil(t, "replica b, listing again once the bucket answers: 1.1.0", r.verdict(b, "1.1.0"), r.first.Add(168*time.Hour))
			if err := r.verdict(b, "1.0.0"); err != nil {
				t.Errorf("replica b: 1.0.0, of the first listing: %v, want it served", err)
			}
			b.WaitIdle()
			r.datings.Store(0)
			r.listAt(b)
			if n := r.datings.Load(); n != 0 {
				t.Errorf("replica b's listing after the bucket answered its lookups asked it for %d dating records, want none", n)
			}

			r.deleteRecord(t, r.datingKey("1.1.0"))
			c := r.replica(t, r.cfg("c"))
			r.listAt(c)
			c.Engine.SetPolicy(pol)
			heldUntil(t, "replica c, with an empty cache, the record deleted: 1.1.0", r.verdict(c, "1.1.0"), r.first.Add(168*time.Hour))
			if err := r.verdict(c, "1.0.0"); err != nil {
				t.Errorf("replica c: 1.0.0, of the first listing: %v, want it served", err)
			}
		})
	}
}
