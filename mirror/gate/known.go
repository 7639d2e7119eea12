package gate

// What the users of the versions the engine holds ask of the package
// policy (through mirror.Inventory): what the cache knows of a version's
// release (export leaves out what the policy refuses; retention does not
// count it toward keep-versions; policy explain prints it).

import (
	"context"
	"fmt"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// KnownRelease returns what the engine knows of when version of a
// provider or module was released, judged as the answers judge it for a
// minimum release age of window: from the cache and the shared tier,
// asking the origin for a provider's signature time only when the engine
// is not sealed (as a listing would). version is canonical (a module's
// is parsed, in either spelling).
func (g *Gate) KnownRelease(ctx context.Context, kind policy.Kind, address, version string, window time.Duration) (policy.Release, error) {
	r := g.rel
	switch kind {
	case policy.Provider:
		p, err := addrs.ParseProvider(address)
		if err != nil {
			return policy.Release{}, err
		}
		v, err := addrs.ParseSemver(version)
		if err != nil {
			return policy.Release{}, err
		}
		// The list the answers serve, which dates its versions: the
		// cache's, else the shared tier's; on a sealed replica, the
		// later listing of the two (mirror/sharedtier), whose dating of
		// a version the cache's list does not name is in it alone.
		if list, _, ok := g.parts.Source.Versions(ctx, records.VersionsKey(p)); ok && list != nil {
			dated := r.providerReleases(ctx, p, list, window, g.now())
			if _, ok := dated.rels[version]; ok {
				// Dated by its own signature when the cache knows it,
				// without asking the origin for it.
				return r.ownRelease(ctx, p, v, dated, false), nil
			}
		}
		// Not in the stored list (an import, a list since refreshed):
		// its record's signature and the listing rule.
		rec, _ := g.parts.Records.CachedPackage(p, v)
		if rec != nil && rec.Provenance == records.ProvenanceUnsigned {
			return policy.Release{Known: true, InHouse: true}, nil
		}
		signed, ok := r.signedAt(ctx, p, version, rec)
		if !ok {
			return policy.Release{}, nil
		}
		return policy.Release{Known: true, At: later(signed, r.absentOf("provider", p.String())[version])}, nil
	case policy.Module:
		m, err := addrs.ParseModule(address)
		if err != nil {
			return policy.Release{}, err
		}
		v, err := addrs.ParseModuleVersion(version)
		if err != nil {
			return policy.Release{}, err
		}
		return r.moduleRelease(m, v), nil
	}
	return policy.Release{}, fmt.Errorf("unknown kind %q", kind)
}
