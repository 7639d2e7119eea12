package gate_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// A writer of the bucket without its key cannot forge a record, but can
// delete one. Replica a lists a provider or a module (1.0.0, the first
// listing), then again with 1.1.0 published since (a provider's signed a
// year ago: published late); its dating record (absent at a's first
// listing) is deleted from the bucket, the version list left. Replica b,
// started with an empty cache, takes a's list as the one before its own:
// it names 1.1.0, and no record dates it, so b took 1.1.0 for a version
// of the first listing ever, released before the mirror first looked,
// and served it however young. a's list carries the dating of the
// versions it names, authenticated with it: b dates 1.1.0 as a does,
// and holds it for the minimum release age.
func TestReleaseAgeDatingRecordDeletedFromTheBucket(t *testing.T) {
	deletedFromTheBucket(t, func(rig releaseRig) string { return rig.datingKey("1.1.0") })
}

// The same, the version list of the address deleted from the bucket
// instead, its dating records left: replica b, with an empty cache, finds
// no listing before its own, and took its own for the first listing ever
// (the bootstrap), 1.1.0 with it, served however young. b looks up the
// dating records of the versions of its first listing: 1.1.0 is dated by
// a's record, and held for the minimum release age.
func TestReleaseAgeVersionListDeletedFromTheBucket(t *testing.T) {
	deletedFromTheBucket(t, func(rig releaseRig) string {
		if rig.kind == "module" {
			return records.ModuleVersionsKeyOf(rig.address)
		}
		return records.VersionsKeyOf(rig.address)
	})
}

// deletedFromTheBucket has replica a list 1.0.0 (the first listing), then
// 1.1.0 with it, deletes the record keyed by key (under the bucket's
// records) from the bucket, has replica b, with an empty cache, list, and
// checks that both hold 1.1.0 for a minimum release age of a week from
// a's first listing and serve 1.0.0.
func deletedFromTheBucket(t *testing.T, key func(releaseRig) string) {
	t.Helper()
	for _, kind := range []string{"provider", "module"} {
		t.Run(kind, func(t *testing.T) {
			r := newListedTwice(t, kind)
			r.deleteRecord(t, key(r.releaseRig))
			b := r.replica(t, r.cfg("b"))
			r.listAt(b)

			pol := enginetest.DecodePolicy(t, `minimum_release_age = "168h"`)
			for name, h := range map[string]*harness.Harness{"a": r.a, "b": b} {
				h.Engine.SetPolicy(pol)
				if err := r.verdict(h, "1.0.0"); err != nil {
					t.Errorf("replica %s: 1.0.0, of the first listing: %v, want it served", name, err)
				}
				heldUntil(t, "replica "+name+": 1.1.0, first listed after the first listing", r.verdict(h, "1.1.0"), r.first.Add(168*time.Hour))
			}
		})
	}
}

// A first listing of many versions looks up the dating records of a few
// of them, once: replica a lists a module of 301 versions (0.9.0, and
// 1.0.0 to 1.299.0: 301 minor version lines), then again with 1.300.0
// and 0.9.1 (a backport into the older major version line) published
// since; the version list is deleted from the bucket. Replica b, with an
// empty cache, asks the bucket for at most 256 dating records of its
// first listing, those of the newest versions of each line among them,
// and holds the two young versions; a second listing asks for none. So
// too with a's list left in the bucket: b, with no listing of its own,
// asked the bucket for the record of every version of a's list and its
// own (thousands for a provider with that many); it asks for those 256
// at most, and the versions it does not ask of take the list's dates.
func TestReleaseAgeFirstListingLookupsBounded(t *testing.T) {
	t.Run("list deleted", func(t *testing.T) { firstListingLookupsBounded(t, true) })
	t.Run("another replica's list", func(t *testing.T) { firstListingLookupsBounded(t, false) })
}

func firstListingLookupsBounded(t *testing.T, deleteList bool) {
	r := newReplicas(t, "module")
	r.publish("0.9.0")
	for i := range 300 {
		r.publish(fmt.Sprintf("1.%d.0", i))
	}
	first := r.listAt(r.a)
	r.publish("1.300.0")
	r.publish("0.9.1")
	r.listAt(r.a)

	if deleteList {
		r.deleteRecord(t, records.ModuleVersionsKeyOf(r.address))
	}

	r.datings.Store(0) // b's alone
	r.written.Store(0)
	b := r.replica(t, r.cfg("b"))
	r.listAt(b)
	if n := r.datings.Load(); n == 0 || n > 256 {
		t.Errorf("b's first listing of 303 versions asked the bucket for %d dating records, want 1 to 256", n)
	}
	if n := r.written.Load(); n != 0 {
		t.Errorf("b's first listing wrote %d dating records the bucket holds back to it, want none", n)
	}
	r.datings.Store(0)
	r.listAt(b)
	if n := r.datings.Load(); n != 0 {
		t.Errorf("b's second listing asked the bucket for %d dating records, want none", n)
	}

	b.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "168h"`))
	for _, v := range []string{"1.300.0", "0.9.1"} {
		heldUntil(t, "replica b: "+v+", first listed after the first listing", r.verdict(b, v), first.Add(168*time.Hour))
	}
	for _, v := range []string{"1.0.0", "0.9.0", "1.299.0"} {
		if err := r.verdict(b, v); err != nil {
			t.Errorf("replica b: %s, of the first listing: %v, want it served", v, err)
		}
	}
}

// failingDatings is a cache whose writes of release dating records fail
// (a full disk, say), while its other writes succeed.
type failingDatings struct{ harness.Store }

func (s failingDatings) PutMeta(key string, v any) error {
	if strings.HasPrefix(key, "release/absent/") {
		return errors.New("disk full")
	}
	return s.Store.PutMeta(key, v)
}

// A version's dating record that the cache failed to store was dated in
// memory alone: once restarted, the mirror found the version named by
// its stored list and no record of it, and took it for a version of the
// first listing ever (the bootstrap), served however young. The stored
// list carries the dating of the versions it names: after the restart,
// 1.1.0 is held for the minimum release age as before it; so too when an
// import stored the list again since (adding a version to it), and the
// list is taken again from the origin after the restart.
func TestReleaseAgeDatingRecordNotStored(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, kind string }{{"provider", "provider"}, {"module", "module"}, {"provider imported into", "provider"}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := enginetest.NewFakeClock()
			clock.Set(time.Now().Truncate(time.Second))
			opts := harness.Options{CacheDir: t.TempDir(), Config: harness.Config{Now: clock.Now, VersionsTTL: time.Minute},
				Wrap: func(s harness.Store) harness.Store { return failingDatings{s} }}
			h := harness.New(t, opts)
			rig := newReleaseRig(t, tc.kind, h.Origin, clock)
			rig.publish("1.0.0")
			first := rig.listAt(h)
			rig.publish("1.1.0")
			rig.listAt(h)

			pol := enginetest.DecodePolicy(t, `minimum_release_age = "168h"`)
			h.Engine.SetPolicy(pol)
			heldUntil(t, "1.1.0, before the restart", rig.verdict(h, "1.1.0"), first.Add(168*time.Hour))
			if tc.name == "provider imported into" {
				h.Engine.SetPolicy(nil)
				p, v := addrs.Provider{Hostname: harness.OriginHost, Namespace: harness.NS, Type: harness.Type}, harness.MustVersion(t, "1.0.0")
				ev, err := h.Engine.Evidence(t.Context(), p, v, []addrs.Platform{harness.MustPlatform(t, "linux_amd64")})
				if err != nil {
					t.Fatal(err)
				}
				in := enginetest.ImportedFrom(ev, func(pl string) []byte { return h.Origin.Archive(harness.NS, harness.Type, "1.0.0", pl) })
				in.Version = v
				if _, err := h.Engine.AirGap().Import(t.Context(), in); err != nil {
					t.Fatal(err)
				}
			}

			h.Stop()
			opts.Wrap = nil
			h.Start(opts)
			h.Engine.SetPolicy(pol)
			heldUntil(t, "1.1.0, after the restart", rig.verdict(h, "1.1.0"), first.Add(168*time.Hour))
			if err := rig.verdict(h, "1.0.0"); err != nil {
				t.Errorf("1.0.0, of the first listing, after the restart: %v", err)
			}
		})
	}
}
