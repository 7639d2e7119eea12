package mirror

// What the users of the versions the engine holds ask of the package
// policy (part of Held): the policy in effect, what the cache knows of a
// version's release, and the verdict on a stored version (export leaves
// out what it refuses; retention does not count it toward
// keep-versions; policy explain prints it).

import (
	"context"
	"fmt"
	"time"

	"github.com/tfmirror/tfmirror/addrs"
	"github.com/tfmirror/tfmirror/policy"
)

// Policy returns the package policy in effect (nil: everything allowed).
func (h *Held) Policy() *policy.Policy { return h.e.policy.current() }

// KnownRelease returns what the engine knows of when version of a
// provider or module was released, judged as the answers judge it for a
// minimum release age of window: from the cache and the shared tier,
// asking the origin for a provider's signature time only when the engine
// is not sealed (as a listing would). version is canonical.
func (h *Held) KnownRelease(ctx context.Context, kind policy.Kind, address, version string, window time.Duration) (Release, error) {
	s := h.e
	switch kind {
	case policy.Provider:
		p, err := addrs.ParseProvider(address)
		if err != nil {
			return Release{}, err
		}
		list, _, err := s.records.cachedVersions(versionsKey(p))
		if err == nil && list != nil {
			if rel, ok := s.releases.providerReleases(ctx, p, list, window, s.cfg.Now())[version]; ok {
				return rel, nil
			}
		}
		// Not in the stored list (an import, a list since refreshed):
		// its record's signature and the listing rule.
		v, err := addrs.ParseSemver(version)
		if err != nil {
			return Release{}, err
		}
		rec, _ := s.records.cachedPackage(p, v)
		if rec != nil && rec.Provenance == ProvenanceUnsigned {
			return Release{Known: true, InHouse: true}, nil
		}
		signed, ok := s.releases.signedAt(ctx, p, version, rec)
		if !ok {
			return Release{}, nil
		}
		return Release{Known: true, At: later(signed, s.releases.absentOf("provider", p.String())[version])}, nil
	case policy.Module:
		m, err := addrs.ParseModule(address)
		if err != nil {
			return Release{}, err
		}
		return s.releases.moduleReleases(m, []string{version}, func(v string) bool {
			var rec ModuleRecord
			_, err := s.store.GetMeta(moduleRecordKey(m, v), &rec)
			return err == nil && rec.Provenance == ProvenanceUnsigned
		})[version], nil
	}
	return Release{}, fmt.Errorf("unknown kind %q", kind)
}

// StoredVerdict is the verdict, now, of the package policy in effect on
// version of a provider or module, with what the engine knows of its
// release (KnownRelease).
func (h *Held) StoredVerdict(ctx context.Context, kind policy.Kind, address, version string) policy.Verdict {
	pol := h.Policy()
	if pol == nil {
		return policy.Verdict{Allowed: true}
	}
	sub := pol.For(kind, address)
	var rel Release
	if w := sub.Window(); w > 0 {
		r, err := h.KnownRelease(ctx, kind, address, version, w)
		if err == nil {
			rel = r
		}
	}
	return sub.Version(version, rel.policy(), h.cfg.Now())
}
