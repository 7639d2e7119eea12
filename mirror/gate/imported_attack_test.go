package gate_test

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
)

// A sealed replica with an empty cache serves the version list another
// replica took, from the shared store (a's, which lacked 1.1.0). An
// import of 1.1.0 into it made a list that is no listing of the origin
// (the replica has none of its own) and took 1.1.0 for none of a's
// listing either: it was dated by nothing but its signature (a year
// old), and served at once, for good, as the sealed replica lists no
// more. The list the import adds to is a's listing, which lacked 1.1.0:
// 1.1.0 is held until a week after it, as a's next listing will date it.
// So too when the replica had not read the bucket's list before the
// import (as a `tfmirror import` that opens the data directory itself):
// the import made a list of 1.1.0 alone, which the replica then served
// in place of the bucket's, 1.0.0 no longer listed.
func TestReleaseAgeImportIntoASharedListDatedByItsListing(t *testing.T) {
	for _, readFirst := range []bool{true, false} {
		name := "list read before the import"
		if !readFirst {
			name = "list not read before the import"
		}
		t.Run(name, func(t *testing.T) {
			r := newReplicas(t, "provider")
			r.publish("1.0.0")
			first := r.listAt(r.a)
			r.a.ReadAll("1.0.0") // in the bucket, for the sealed replica to serve
			r.a.WaitIdle()
			r.publish("1.1.0")

			cfg := r.cfg("b")
			cfg.Offline = true
			b := r.replica(t, cfg)
			if readFirst {
				if got := b.Listed(); !slices.Equal(got, []string{"1.0.0"}) {
					t.Fatalf("the sealed replica lists %v, want a's listing, [1.0.0]", got)
				}
			}
			importVersion(t, b, "1.1.0")
			if got := b.Listed(); !slices.Equal(got, []string{"1.0.0", "1.1.0"}) {
				t.Errorf("after the import the sealed replica lists %v, want [1.0.0 1.1.0]", got)
			}

			b.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "168h"`))
			if err := r.verdict(b, "1.0.0"); err != nil {
				t.Errorf("1.0.0, of a's first listing: %v, want it served", err)
			}
			heldUntil(t, "1.1.0, imported into a's listing, which lacked it", r.verdict(b, "1.1.0"), first.Add(168*time.Hour))
		})
	}
}

// An air-gapped mirror fed by imports alone serves the versions it
// imports as it did before imports kept what they added: by their
// signature (a year old), at once, a version imported into a list an
// earlier import made included, whichever release made it. A list an
// import of this release made is no listing, which lacked nothing; one
// an import of an earlier release wrote (no time of listing, no mark of
// an import alone) cannot tell whether a listing of the origin is behind
// it, nor when: dating the version by the time the list was stored (the
// import before) would hold every import of the mirror back for the
// window from the one before it.
func TestReleaseAgeImportOnlyMirrorServesItsImports(t *testing.T) {
	t.Parallel()
	for _, earlier := range []bool{false, true} {
		name := "list of this release"
		if earlier {
			name = "list of an earlier release"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, rig, opts := newImportRig(t, true)
			rig.publish("1.0.0")
			importVersion(t, h, "1.0.0")
			if earlier {
				putEarlierReleasesImportedList(t, h, rig, opts)
			}
			rig.clock.Add(time.Hour)
			rig.publish("1.1.0")
			importVersion(t, h, "1.1.0")

			h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "168h"`))
			for _, v := range []string{"1.0.0", "1.1.0"} {
				if err := rig.verdict(h, v); err != nil {
					t.Errorf("%s, imported, signed a year ago: %v, want it served", v, err)
				}
			}
		})
	}
}

// A version an import adds to a list an import of an earlier release
// wrote is judged by its signature until the next listing (see above),
// but once the origin lists it, it is no version of that list, which
// lacked it: it is dated by the list's time of storing, as it was then
// taken for a listing (stored by the wall clock, ahead of the engine's:
// no later than the listing that names it).
func TestReleaseAgeImportIntoAnEarlierReleasesListDatedOnceListed(t *testing.T) {
	t.Parallel()
	h, rig, opts := newImportRig(t, false)
	rig.publish("1.0.0")
	rig.listAt(h)
	putEarlierReleasesImportedList(t, h, rig, opts)
	rig.publish("1.1.0")
	importVersion(t, h, "1.1.0")
	next := rig.listAt(h)

	h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "168h"`))
	if err := rig.verdict(h, "1.0.0"); err != nil {
		t.Errorf("1.0.0, of the first listing: %v, want it served", err)
	}
	heldUntil(t, "1.1.0, imported into the list, which lacked it", rig.verdict(h, "1.1.0"), next.Add(168*time.Hour))
}

// Retention removes a version that cannot be fetched again from its
// version list (mirror/inventory.RemoveVersion), storing the list again:
// the list keeps what the imports added to it and when it was listed, so
// that 1.1.0, which another import added to the same list, stays dated by
// the listing that lacked it on a sealed mirror.
func TestReleaseAgeImportedVersionDatedAfterRetentionRemovesAnother(t *testing.T) {
	t.Parallel()
	h, rig, opts := newImportRig(t, false)
	rig.publish("1.0.0")
	first := rig.listAt(h)
	h.ReadAll("1.0.0")
	h.Stop()
	opts.Config.Offline = true
	h.Start(opts)
	rig.publish("1.1.0")
	rig.publish("1.2.0")
	importVersion(t, h, "1.1.0")
	importVersion(t, h, "1.2.0")
	if err := h.Engine.Inventory().RemoveVersion("provider", rig.address, "1.2.0"); err != nil {
		t.Fatal(err)
	}
	h.Stop() // what the engine remembers of the list goes
	h.Start(opts)

	h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "168h"`))
	if err := rig.verdict(h, "1.0.0"); err != nil {
		t.Errorf("1.0.0, of the first listing: %v, want it served", err)
	}
	heldUntil(t, "1.1.0, imported after the first listing", rig.verdict(h, "1.1.0"), first.Add(168*time.Hour))
}

// An import into a replica with no list of its own, while the shared
// store does not answer its reads, fails: a list of the import alone
// would stand for the bucket's (a's, which names 1.0.0) on this replica
// until it lists the origin again, for good on a sealed one. Once the
// store answers, the import adds to a's list.
func TestReleaseAgeImportWhileTheBucketDoesNotAnswerFails(t *testing.T) {
	r := newReplicas(t, "provider")
	r.publish("1.0.0")
	r.listAt(r.a)
	r.a.ReadAll("1.0.0")
	r.a.WaitIdle()
	r.publish("1.1.0")

	var readsDown atomic.Bool
	cfg := r.cfg("b")
	cfg.Offline = true
	cfg.Shared = readsDownTier{cfg.Shared.(outageTier), &readsDown}
	b := r.replica(t, cfg)
	readsDown.Store(true)
	imp := importer(t, b, "1.1.0")
	if err := imp(); err == nil || !strings.Contains(err.Error(), "shared store's version list") {
		t.Fatalf("importing 1.1.0 while the bucket does not answer: %v, want the import refused for it", err)
	}
	readsDown.Store(false)
	if err := imp(); err != nil {
		t.Fatalf("importing 1.1.0 once the bucket answers: %v", err)
	}
	if got := b.Listed(); !slices.Equal(got, []string{"1.0.0", "1.1.0"}) {
		t.Errorf("after the import the sealed replica lists %v, want [1.0.0 1.1.0]", got)
	}
}
