package gate_test

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/mirror/sharedtier"
)

// A sealed replica of a deployment on a shared store lists what the
// connected replicas listed last where that is later than its own list,
// whatever wrote its own.

// sealedAfterListing starts replica b on a cache of its own, has it list
// the provider once while connected (its own listing, of 1.0.0, at the
// time returned), and starts it again sealed on that cache.
func sealedAfterListing(t *testing.T, r *replicas) (*harness.Harness, time.Time) {
	t.Helper()
	opts := harness.Options{CacheDir: t.TempDir(), Config: r.cfg("b")}
	b := &harness.Harness{T: t, Origin: r.a.Origin}
	b.Start(opts)
	listed := r.listAt(b)
	b.Stop()
	opts.Config.Offline = true
	b.Start(opts)
	if got := b.Listed(); !slices.Equal(got, []string{"1.0.0"}) {
		t.Fatalf("sealed replica b lists %v, want its own listing, [1.0.0]", got)
	}
	return b, listed
}

// Replica b listed the provider once, connected, and serves sealed since.
// Replica a then lists 1.1.0, published since, into the bucket: b lists
// it too once it asks the bucket again, rather than its own list for
// good; and dates it as a does, by b's listing, which lacked it: held for
// a week from then. 1.0.0, of the first listing, is served.
func TestReleaseAgeSealedReplicaTakesTheBucketsLaterList(t *testing.T) {
	r := newReplicas(t, "provider")
	r.publish("1.0.0")
	r.first = r.listAt(r.a)
	r.a.ReadAll("1.0.0")
	b, listed := sealedAfterListing(t, r)

	r.publish("1.1.0")
	r.listAt(r.a)
	r.a.ReadAll("1.1.0") // in the bucket, for b to serve
	r.a.WaitIdle()
	r.clock.Add(sharedtier.SeenTTL)
	if got := b.Listed(); !slices.Equal(got, []string{"1.0.0", "1.1.0"}) {
		t.Fatalf("sealed replica b lists %v, want a's later listing, [1.0.0 1.1.0]", got)
	}

	pol := enginetest.DecodePolicy(t, `minimum_release_age = "168h"`)
	for name, h := range map[string]*harness.Harness{"replica a": r.a, "sealed replica b": b} {
		h.Engine.SetPolicy(pol)
		if err := r.verdict(h, "1.0.0"); err != nil {
			t.Errorf("%s: 1.0.0, of the first listing: %v, want it served", name, err)
		}
		heldUntil(t, name+": 1.1.0, published after b's listing", r.verdict(h, "1.1.0"), listed.Add(168*time.Hour))
	}
}

// As above, but the bucket's later list does not date 1.1.0: replica x,
// with an empty cache, listed it while the bucket failed its reads (its
// listing blind: its list, written to the bucket, dates nothing, and no
// record of 1.1.0 is there). b dates 1.1.0 by its own listing, which
// lacked it, never by its signature alone (a year old).
func TestReleaseAgeSealedReplicaDatesTheBucketsUndatedVersion(t *testing.T) {
	r := newReplicas(t, "provider")
	r.publish("1.0.0")
	r.first = r.listAt(r.a)
	r.a.ReadAll("1.0.0")
	b, listed := sealedAfterListing(t, r)

	r.publish("1.1.0")
	var readsDown atomic.Bool
	cfg := r.cfg("x")
	cfg.Shared = readsDownTier{cfg.Shared.(outageTier), &readsDown}
	readsDown.Store(true)
	x := r.replica(t, cfg)
	r.listAt(x)
	readsDown.Store(false)
	x.ReadAll("1.1.0") // in the bucket, for b to serve
	x.WaitIdle()
	r.clock.Add(sharedtier.SeenTTL)
	if got := b.Listed(); !slices.Equal(got, []string{"1.0.0", "1.1.0"}) {
		t.Fatalf("sealed replica b lists %v, want x's later listing, [1.0.0 1.1.0]", got)
	}
	b.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "168h"`))
	if err := r.verdict(b, "1.0.0"); err != nil {
		t.Errorf("1.0.0, of the first listing: %v, want it served", err)
	}
	heldUntil(t, "sealed replica b: 1.1.0, published after its listing", r.verdict(b, "1.1.0"), listed.Add(168*time.Hour))
}

// Replica b, sealed on its own older list, imports 1.2.0, which the
// origin then no longer lists, and a lists 1.1.0, published since, into
// the bucket. b lists a's later listing with its import: the import's
// version does not go with b's own list. Added to a's listing, which
// lacked it, it is dated by that listing's time, as an import's
// addition is.
func TestReleaseAgeSealedReplicaKeepsItsImportOverTheBucketsLaterList(t *testing.T) {
	r := newReplicas(t, "provider")
	r.publish("1.0.0")
	r.first = r.listAt(r.a)
	r.a.ReadAll("1.0.0")
	b, _ := sealedAfterListing(t, r)

	r.publish("1.2.0")
	importVersion(t, b, "1.2.0")
	r.withdraw("1.2.0")
	if got := b.Listed(); !slices.Equal(got, []string{"1.0.0", "1.2.0"}) {
		t.Fatalf("sealed replica b lists %v once 1.2.0 is imported, want [1.0.0 1.2.0]", got)
	}
	r.publish("1.1.0")
	later := r.listAt(r.a)
	r.a.ReadAll("1.1.0")
	r.a.WaitIdle()
	r.clock.Add(sharedtier.SeenTTL)
	if got := b.Listed(); !slices.Equal(got, []string{"1.0.0", "1.1.0", "1.2.0"}) {
		t.Fatalf("sealed replica b lists %v, want a's later listing and its import, [1.0.0 1.1.0 1.2.0]", got)
	}
	b.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "168h"`))
	heldUntil(t, "sealed replica b: 1.2.0, imported, not in a's later listing", r.verdict(b, "1.2.0"), later.Add(168*time.Hour))
}

// Replica b, sealed on its own older list, serves a's later listing,
// and a prune on b removes 1.1.0, which only a's listing names: b no
// longer lists it, nor does it when it asks the bucket again, until a
// lists the origin again, naming it.
func TestSealedReplicaRemovalStaysOffUntilALaterListing(t *testing.T) {
	r := newReplicas(t, "provider")
	r.publish("1.0.0")
	r.first = r.listAt(r.a)
	r.a.ReadAll("1.0.0")
	b, _ := sealedAfterListing(t, r)

	r.publish("1.1.0")
	r.listAt(r.a)
	r.a.ReadAll("1.1.0")
	r.a.WaitIdle()
	r.clock.Add(sharedtier.SeenTTL)
	if got := b.Listed(); !slices.Equal(got, []string{"1.0.0", "1.1.0"}) {
		t.Fatalf("sealed replica b lists %v, want a's later listing, [1.0.0 1.1.0]", got)
	}
	if err := b.Engine.Inventory().RemoveVersion("provider", r.address, "1.1.0"); err != nil {
		t.Fatal(err)
	}
	for _, when := range []string{"once 1.1.0 is removed", "asking the bucket again"} {
		if got := b.Listed(); !slices.Equal(got, []string{"1.0.0"}) {
			t.Errorf("sealed replica b lists %v %s, want [1.0.0]", got, when)
		}
		r.clock.Add(sharedtier.SeenTTL)
	}
	r.listAt(r.a)
	r.clock.Add(sharedtier.SeenTTL)
	if got := b.Listed(); !slices.Equal(got, []string{"1.0.0", "1.1.0"}) {
		t.Errorf("sealed replica b lists %v once a listed again, want [1.0.0 1.1.0]", got)
	}
}
