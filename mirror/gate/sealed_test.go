package gate_test

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/mirror/sharedtier"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// A sealed replica of a deployment on a shared store lists what the
// connected replicas listed last where that is later than its own list,
// whatever wrote its own.

// sealedAfterListing starts replica b on a cache of its own, has it list
// the provider once while connected (its own listing, of 1.0.0, at the
// time returned), and starts it again sealed on that cache.
func sealedAfterListing(t *testing.T, r *replicas) (*harness.Harness, time.Time) {
	t.Helper()
	b, _, listed := sealedAfterListingOn(t, r)
	return b, listed
}

// sealedAfterListingOn is sealedAfterListing, returning the options b
// was started sealed with, to start it again.
func sealedAfterListingOn(t *testing.T, r *replicas) (*harness.Harness, harness.Options, time.Time) {
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
	return b, opts, listed
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

// Replica b, sealed on its own older list, serves x's later listing,
// which does not date 1.1.0 (x listed it blind, its list dating
// nothing): b dates it by its own listing, which lacked it. A prune on b
// then removes 1.2.0, storing the list it served without it, and x lists
// the origin again, its list dating nothing still: b goes on dating
// 1.1.0 by its own listing, as the list the prune stored does, never by
// its signature alone (a year old).
func TestReleaseAgeSealedReplicaRemovalKeepsTheDatingOfTheLaterListing(t *testing.T) {
	r := newReplicas(t, "provider")
	r.publish("1.0.0")
	r.first = r.listAt(r.a)
	r.a.ReadAll("1.0.0")
	b, listed := sealedAfterListing(t, r)

	r.publish("1.1.0")
	r.publish("1.2.0")
	var readsDown atomic.Bool
	cfg := r.cfg("x")
	cfg.Shared = readsDownTier{cfg.Shared.(outageTier), &readsDown}
	readsDown.Store(true)
	x := r.replica(t, cfg)
	r.listAt(x)
	readsDown.Store(false)
	x.ReadAll("1.1.0")
	x.ReadAll("1.2.0")
	x.WaitIdle()
	r.clock.Add(sharedtier.SeenTTL)
	if got := b.Listed(); !slices.Equal(got, []string{"1.0.0", "1.1.0", "1.2.0"}) {
		t.Fatalf("sealed replica b lists %v, want x's later listing, [1.0.0 1.1.0 1.2.0]", got)
	}
	if err := b.Engine.Inventory().RemoveVersion("provider", r.address, "1.2.0"); err != nil {
		t.Fatal(err)
	}
	readsDown.Store(true)
	r.listAt(x)
	readsDown.Store(false)
	x.WaitIdle()
	r.clock.Add(sharedtier.SeenTTL)
	if got := b.Listed(); !slices.Equal(got, []string{"1.0.0", "1.1.0", "1.2.0"}) {
		t.Fatalf("sealed replica b lists %v once x listed again, want [1.0.0 1.1.0 1.2.0]", got)
	}
	b.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "168h"`))
	heldUntil(t, "sealed replica b: 1.1.0, published after its listing", r.verdict(b, "1.1.0"), listed.Add(168*time.Hour))
}

// Replica b, sealed on its own older list, serves a's later listing and
// holds 1.1.0, which only that listing names, then starts again. What
// retention and export ask of a stored version (Inventory.StoredVerdict)
// judges 1.1.0 as the answers do, by the later listing b serves (dated
// by b's listing, which lacked it), not by b's own list, which does not
// name it, and its signature alone (a year old).
func TestReleaseAgeSealedReplicaStoredVerdictByTheListServed(t *testing.T) {
	r := newReplicas(t, "provider")
	r.publish("1.0.0")
	r.first = r.listAt(r.a)
	r.a.ReadAll("1.0.0")
	b, opts, listed := sealedAfterListingOn(t, r)

	r.publish("1.1.0")
	var readsDown atomic.Bool
	cfg := r.cfg("x")
	cfg.Shared = readsDownTier{cfg.Shared.(outageTier), &readsDown}
	readsDown.Store(true)
	x := r.replica(t, cfg)
	r.listAt(x)
	readsDown.Store(false)
	x.ReadAll("1.1.0")
	x.WaitIdle()
	r.clock.Add(sharedtier.SeenTTL)
	b.ReadAll("1.1.0")
	b.WaitIdle()
	b.Stop()
	b.Start(opts)

	pol := enginetest.DecodePolicy(t, `minimum_release_age = "168h"`)
	b.Engine.SetPolicy(pol)
	verdict := b.Engine.Inventory().StoredVerdict(t.Context(), policy.Provider, r.address, "1.1.0")
	if verdict.Allowed || verdict.Rule != policy.RuleMinReleaseAge || !verdict.AvailableAt.Equal(listed.Add(168*time.Hour)) {
		t.Errorf("stored verdict on 1.1.0: %+v, want held by the minimum release age until %v", verdict, listed.Add(168*time.Hour))
	}
	heldUntil(t, "sealed replica b: 1.1.0, published after its listing", r.verdict(b, "1.1.0"), listed.Add(168*time.Hour))
}
