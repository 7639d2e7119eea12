package gate_test

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// The release dating of versions around an import (tfmirror import of a
// bundle), which writes the cache's version list of a provider: a list
// an import wrote is no listing of the origin.
//
// In these tests the engines' clock runs a month behind the wall clock
// the cache stamps what it stores with, so that an import, stamped at the
// wall clock's time, comes after every listing, as it does on one clock.

// importVersion imports version v of the test provider into h, as a
// bundle another mirror exported carries it (its evidence and archive
// taken from h's origin by an engine with a cache of its own).
func importVersion(t *testing.T, h *harness.Harness, v string) {
	t.Helper()
	if err := importer(t, h, v)(); err != nil {
		t.Fatalf("importing %s: %v", v, err)
	}
}

// importer returns what imports version v of the harness's provider, for
// linux_amd64, into h, as a bundle carries it, verified by another
// mirror: each call imports it again.
func importer(t *testing.T, h *harness.Harness, v string) func() error {
	t.Helper()
	src := &harness.Harness{T: t, Origin: h.Origin}
	src.Start(harness.Options{})
	defer src.Stop()
	p, ver := src.Provider(), harness.MustVersion(t, v)
	ev, err := src.Engine.Evidence(t.Context(), p, ver, []addrs.Platform{harness.MustPlatform(t, "linux_amd64")})
	if err != nil {
		t.Fatal(err)
	}
	in := enginetest.ImportedFrom(ev, func(pl string) []byte { return h.Origin.Archive(harness.NS, harness.Type, v, pl) })
	in.Version = ver
	return func() error {
		_, err := h.Engine.AirGap().Import(t.Context(), in)
		return err
	}
}

// monthBehind sets clock a month behind the wall clock (see above).
func monthBehind(clock *enginetest.FakeClock) {
	clock.Set(time.Now().Add(-30 * day).Truncate(time.Second))
}

// newImportRig is a harness whose engine's clock runs a month behind the
// wall clock, its version lists' time to live a minute (sealed when
// offline), the release rig of its provider, and the options it started
// with (to start it again on its cache).
func newImportRig(t *testing.T, offline bool) (*harness.Harness, releaseRig, harness.Options) {
	t.Helper()
	clock := enginetest.NewFakeClock()
	monthBehind(clock)
	opts := harness.Options{CacheDir: t.TempDir(), Config: harness.Config{Now: clock.Now, VersionsTTL: time.Minute, Offline: offline}}
	h := harness.New(t, opts)
	return h, newReleaseRig(t, "provider", h.Origin, clock), opts
}

// putEarlierReleasesImportedList stores, as h's cache's version list of
// the rig's provider, a list of 1.0.0 as an import of an earlier release
// wrote it (imported; no time of listing, no mark of an import alone
// nor of what it added), and starts h again on its cache, so that the
// engine remembers nothing of the list before.
func putEarlierReleasesImportedList(t *testing.T, h *harness.Harness, rig releaseRig, opts harness.Options) {
	t.Helper()
	list := map[string]any{"schema": records.Schema, "imported": true, "dates": map[string]any{},
		"versions": []any{map[string]any{"version": "1.0.0", "platforms": []string{"linux_amd64"}}}}
	if err := h.Store.PutMeta(records.VersionsKeyOf(rig.address), list); err != nil {
		t.Fatal(err)
	}
	h.Stop()
	h.Start(opts)
}

// Replica a lists 1.0.0 and 1.0.1 (its first listing: the bootstrap),
// then again with 1.1.0 published since, which it dates. Replica b,
// whose cache never listed the provider, imports 1.1.0 from a bundle,
// then lists the origin. b took the list the import made for a listing
// of the origin before its own: 1.0.0 and 1.0.1, which the import lacked,
// for versions published since, held for the minimum release age from
// then, which a served; and 1.1.0, which the import named, for one of
// that listing, released before it and undated (its signature alone,
// a year old), which a holds. Replica c, started with an empty cache
// after b listed, took b's dating of them from b's list, and so did a at
// its next listing. A list an import made is no listing of the origin:
// b's first listing of the origin is its first, with the lookups a first
// listing makes, and every replica dates the three versions as a did. So
// too with the provider's version list deleted from the bucket before b
// lists (a's dating records left).
func TestReleaseAgeFirstListingAfterAnImport(t *testing.T) {
	for _, deleteList := range []bool{false, true} {
		name := "a's list in the bucket"
		if deleteList {
			name = "list deleted from the bucket"
		}
		t.Run(name, func(t *testing.T) {
			r := newReplicas(t, "provider")
			monthBehind(r.clock)
			r.publish("1.0.0")
			r.publish("1.0.1")
			first := r.listAt(r.a)
			r.publish("1.1.0")
			r.listAt(r.a)
			if deleteList {
				r.deleteRecord(t, records.VersionsKeyOf(r.address))
			}

			pol := enginetest.DecodePolicy(t, `minimum_release_age = "168h"`)
			check := func(name string, h *harness.Harness) {
				t.Helper()
				h.Engine.SetPolicy(pol)
				for _, v := range []string{"1.0.0", "1.0.1"} {
					if err := r.verdict(h, v); err != nil {
						t.Errorf("replica %s: %s, of a's first listing: %v, want it served", name, v, err)
					}
				}
				heldUntil(t, "replica "+name+": 1.1.0, first listed after the first listing", r.verdict(h, "1.1.0"), first.Add(168*time.Hour))
			}
			b := r.replica(t, r.cfg("b"))
			importVersion(t, b, "1.1.0")
			r.listAt(b)
			check("b", b)
			c := r.replica(t, r.cfg("c"))
			r.listAt(c)
			r.listAt(r.a)
			check("c", c)
			check("a", r.a)
		})
	}
}

// An import that adds a version to a version list the origin's listing
// made (here one the cache holds already, so that the list gains no
// version) kept the list but not when it was listed: the list was then
// taken for one listed at the import, and a version published since the
// listing was dated by the import's time, held longer than the listing
// rule says. The list keeps its time of listing: 1.2.0 is dated by the
// listing before the one that first named it.
func TestReleaseAgeImportKeepsTheListingTime(t *testing.T) {
	t.Parallel()
	clock := enginetest.NewFakeClock()
	monthBehind(clock)
	h := harness.New(t, harness.Options{Config: harness.Config{Now: clock.Now, VersionsTTL: time.Minute}})
	rig := newReleaseRig(t, "provider", h.Origin, clock)
	rig.publish("1.0.0")
	first := rig.listAt(h)
	rig.publish("1.1.0")
	second := rig.listAt(h)
	importVersion(t, h, "1.0.0")
	rig.publish("1.2.0")
	rig.listAt(h)

	h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "168h"`))
	heldUntil(t, "1.1.0", rig.verdict(h, "1.1.0"), first.Add(168*time.Hour))
	heldUntil(t, "1.2.0, first listed after the import", rig.verdict(h, "1.2.0"), second.Add(168*time.Hour))
}

// A version an import adds to a version list that no listing of the
// origin named yet is no version of that listing: the listing rule dates
// it by the latest listing that lacked it, the one the import added it
// to. It was taken for one of that listing, undated, and judged by its
// signature alone (a year old), served at once. Held until a week after
// that listing: once the origin lists it, and on a sealed mirror that
// does not.
func TestReleaseAgeImportedVersionDatedByTheListing(t *testing.T) {
	t.Parallel()
	for _, sealed := range []bool{false, true} {
		name := "listed again"
		if sealed {
			name = "sealed"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, rig, opts := newImportRig(t, false)
			rig.publish("1.0.0")
			first := rig.listAt(h)
			rig.publish("1.1.0")
			importVersion(t, h, "1.1.0")
			if sealed {
				if _, err := h.Packages("1.0.0"); err != nil { // cached, to be served sealed
					t.Fatal(err)
				}
				h.Stop()
				opts.Config.Offline = true
				h.Start(opts)
			} else {
				rig.listAt(h)
			}

			h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "168h"`))
			if err := rig.verdict(h, "1.0.0"); err != nil {
				t.Errorf("1.0.0, of the first listing: %v, want it served", err)
			}
			heldUntil(t, "1.1.0, imported after the first listing", rig.verdict(h, "1.1.0"), first.Add(168*time.Hour))
		})
	}
}

// A version list an import of an earlier release wrote does not say
// whether a listing of the origin is behind it (nor which versions the
// import added): it is taken for a listing at its time of storing, as it
// was then, never for a list an import made alone, which would make the
// next listing a first one and pass every version published since the
// listing behind it for one of the first listing. Here the cache's list,
// listed with 1.0.0 alone, is stored again as such an import wrote it
// (its time of listing left out); 1.1.0, published since, is dated by
// that list (no earlier than the next listing: the list is stored by the
// wall clock, ahead of the engine's).
func TestReleaseAgeEarlierReleasesImportedListTakenAsBefore(t *testing.T) {
	t.Parallel()
	h, rig, opts := newImportRig(t, false)
	rig.publish("1.0.0")
	rig.listAt(h)
	putEarlierReleasesImportedList(t, h, rig, opts)
	rig.publish("1.1.0")
	next := rig.listAt(h)

	h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "168h"`))
	if err := rig.verdict(h, "1.0.0"); err != nil {
		t.Errorf("1.0.0, of the first listing: %v, want it served", err)
	}
	heldUntil(t, "1.1.0, published after the list", rig.verdict(h, "1.1.0"), next.Add(168*time.Hour))
}

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

// An import into a list a listing made keeps the origin's warnings the
// list carries (a deprecation notice, which the provider registry door
// passes on to the clients): they were dropped until the next listing.
func TestImportKeepsTheListsWarnings(t *testing.T) {
	t.Parallel()
	h, rig, opts := newImportRig(t, false)
	rig.publish("1.0.0")
	rig.listAt(h)
	key := records.VersionsKeyOf(rig.address)
	var list records.VersionList
	if _, err := h.Store.GetMeta(key, &list); err != nil {
		t.Fatal(err)
	}
	list.Warnings = []string{"This provider is deprecated."}
	if err := h.Store.PutMeta(key, &list); err != nil {
		t.Fatal(err)
	}
	h.Stop() // what the engine remembers of the list goes
	h.Start(opts)
	rig.publish("1.1.0")
	importVersion(t, h, "1.1.0")
	var after records.VersionList
	if _, err := h.Store.GetMeta(key, &after); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(after.Names(), []string{"1.0.0", "1.1.0"}) || !slices.Equal(after.Warnings, list.Warnings) {
		t.Errorf("after the import the list names %v with warnings %q, want [1.0.0 1.1.0] with %q", after.Names(), after.Warnings, list.Warnings)
	}
}
