package gate_test

import (
	"slices"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// The release dating of versions that retention removed: a prune that
// names a version that cannot be fetched again takes it off its version
// list (mirror/inventory.RemoveVersion), and a connected mirror lists it
// again once it lists the origin. Removing a version from the cache
// changes nothing of its dating.

// 1.0.0 (of the first listing: released before the mirror first looked)
// and 1.1.0 (published since, dated by the first listing) are imported
// into the list that names them, and a prune removes them. The list
// stored without them no longer named them: the next listing, which
// names them again, took them for versions published since it and dated
// them by its time, so that 1.0.0, served before, was held for the
// minimum release age from then. The list keeps them among the versions
// it named (records.VersionList.Lacked): 1.0.0 is served, and 1.1.0 is
// held until a week after the first listing, no sooner.
func TestReleaseAgeVersionRemovedByRetentionKeepsItsDating(t *testing.T) {
	t.Parallel()
	clock := enginetest.NewFakeClock()
	monthBehind(clock)
	h := harness.New(t, harness.Options{Config: harness.Config{Now: clock.Now, VersionsTTL: time.Minute}})
	rig := newReleaseRig(t, "provider", h.Origin, clock)
	rig.publish("1.0.0")
	first := rig.listAt(h)
	rig.publish("1.1.0")
	rig.listAt(h)
	importVersion(t, h, "1.0.0")
	importVersion(t, h, "1.1.0")
	for _, v := range []string{"1.0.0", "1.1.0"} {
		if err := h.Engine.Inventory().RemoveVersion("provider", rig.address, v); err != nil {
			t.Fatal(err)
		}
	}
	rig.listAt(h)

	h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "168h"`))
	if err := rig.verdict(h, "1.0.0"); err != nil {
		t.Errorf("1.0.0, of the first listing, removed and listed again: %v, want it served", err)
	}
	heldUntil(t, "1.1.0, removed and listed again", rig.verdict(h, "1.1.0"), first.Add(168*time.Hour))
}

// Replica b, sealed, with no version list of its own, serves a's from
// the shared store, and a prune on b removes 1.0.0 (of a's first
// listing), which b had cached. b no longer lists it; the list it stores
// for that is a's, with 1.0.0 taken off, and was stored as a listing of
// b's own, at the time of a's: taken for the one before b's next listing
// (the newest, before a's own of the same time), which, once b is no
// longer sealed, took 1.0.0 for a version published since and held it.
// The list b stores is no listing of b's (as one an import makes on such
// a replica): b's next listing takes a's list for the one before it,
// serves 1.0.0, and holds 1.1.0 as a does.
func TestReleaseAgeRemovalFromAnotherReplicasList(t *testing.T) {
	r := newListedTwice(t, "provider")
	r.a.ReadAll("1.0.0", "1.1.0")
	r.a.WaitIdle()

	cfg := r.cfg("b")
	cfg.Offline = true
	opts := harness.Options{CacheDir: t.TempDir(), Config: cfg}
	b := &harness.Harness{T: t, Origin: r.a.Origin}
	b.Start(opts)
	if got := b.Listed(); !slices.Equal(got, []string{"1.0.0", "1.1.0"}) {
		t.Fatalf("sealed replica b lists %v, want a's list", got)
	}
	b.ReadAll("1.0.0")
	if err := b.Engine.Inventory().RemoveVersion("provider", r.address, "1.0.0"); err != nil {
		t.Fatal(err)
	}
	if got := b.Listed(); !slices.Equal(got, []string{"1.1.0"}) {
		t.Errorf("sealed replica b lists %v once 1.0.0 is removed, want [1.1.0]", got)
	}
	var stored records.VersionList
	if _, err := b.Store.GetMeta(records.VersionsKeyOf(r.address), &stored); err != nil {
		t.Fatal(err)
	}
	if _, listing := stored.Listed(); listing {
		t.Errorf("the list b stored once 1.0.0 was removed is taken for a listing of b's own: %+v", stored)
	}

	b.Stop()
	opts.Config.Offline = false
	b.Start(opts)
	r.listAt(b)
	b.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "168h"`))
	if err := r.verdict(b, "1.0.0"); err != nil {
		t.Errorf("replica b: 1.0.0, of a's first listing, removed and listed again: %v, want it served", err)
	}
	heldUntil(t, "replica b: 1.1.0", r.verdict(b, "1.1.0"), r.first.Add(168*time.Hour))
}

// As above, with b's engine started again between the read and the
// prune, as a prune of b's data directory (tfmirror cache prune, when no
// tfmirror serves it) starts one: the removal took 1.0.0 off a's list
// only while b's engine remembered it, having served it; otherwise it
// found no list, and b went on listing 1.0.0 from the shared store. The
// removal reads the list b serves, the shared store's where b has none
// of its own, as an import does.
func TestRemovalFromAnotherReplicasListNotRemembered(t *testing.T) {
	r := newListedTwice(t, "provider")
	r.a.ReadAll("1.0.0", "1.1.0")
	r.a.WaitIdle()

	cfg := r.cfg("b")
	cfg.Offline = true
	opts := harness.Options{CacheDir: t.TempDir(), Config: cfg}
	b := &harness.Harness{T: t, Origin: r.a.Origin}
	b.Start(opts)
	b.ReadAll("1.0.0")
	b.Stop()
	b.Start(opts)
	if err := b.Engine.Inventory().RemoveVersion("provider", r.address, "1.0.0"); err != nil {
		t.Fatal(err)
	}
	for _, when := range []string{"once 1.0.0 is removed", "started again"} {
		if got := b.Listed(); !slices.Equal(got, []string{"1.1.0"}) {
			t.Errorf("sealed replica b lists %v %s, want [1.1.0]", got, when)
		}
		b.Stop()
		b.Start(opts)
	}
}

// A version list of an earlier release does not keep when the origin was
// listed for it: its time of storing tells. The removal stored it again,
// and the list was then taken for one listed at the removal: 1.1.0,
// published since the listing and added by the next one, was dated by the
// time of the removal, held longer than the listing rule says. The list
// stored again keeps the time of the listing, as an import keeps it.
func TestReleaseAgeRemovalKeepsTheListingTime(t *testing.T) {
	t.Parallel()
	clock := enginetest.NewFakeClock()
	clock.Set(time.Now().Truncate(time.Second)) // the cache's clock, the wall clock, stays behind it
	opts := harness.Options{CacheDir: t.TempDir(), Config: harness.Config{Now: clock.Now, VersionsTTL: time.Minute}}
	h := harness.New(t, opts)
	rig := newReleaseRig(t, "provider", h.Origin, clock)
	rig.publish("1.0.0")
	rig.publish("1.0.1")
	rig.listAt(h)
	key := records.VersionsKeyOf(rig.address)
	earlier := map[string]any{"schema": records.Schema, "dates": map[string]any{}, "versions": []any{
		map[string]any{"version": "1.0.0", "platforms": []string{"linux_amd64"}},
		map[string]any{"version": "1.0.1", "platforms": []string{"linux_amd64"}}}}
	if err := h.Store.PutMeta(key, earlier); err != nil {
		t.Fatal(err)
	}
	listed, err := h.Store.GetMeta(key, &records.VersionList{})
	if err != nil {
		t.Fatal(err)
	}
	h.Stop() // what the engine remembers of the list goes
	h.Start(opts)
	if err := h.Engine.Inventory().RemoveVersion("provider", rig.address, "1.0.1"); err != nil {
		t.Fatal(err)
	}
	rig.publish("1.1.0")
	rig.listAt(h)

	h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "168h"`))
	for _, v := range []string{"1.0.0", "1.0.1"} {
		if err := rig.verdict(h, v); err != nil {
			t.Errorf("%s, of the first listing: %v, want it served", v, err)
		}
	}
	heldUntil(t, "1.1.0, published after the listing", rig.verdict(h, "1.1.0"), listed.Add(168*time.Hour))
}
