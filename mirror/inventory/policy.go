package inventory

// What the users of the versions the engine holds ask of the package
// policy: the policy in effect, what the cache knows of a version's
// release, and the verdict on a stored version (export leaves out what
// it refuses; retention does not count it toward keep-versions; policy
// explain prints it).

import (
	"context"
	"time"

	"github.com/tfmirror/tfmirror/v2/policy"
)

// Policy returns the package policy in effect (nil: everything allowed).
func (s *Inventory) Policy() *policy.Policy { return s.parts.Gate.Current() }

// KnownRelease returns what the engine knows of when version of a
// provider or module was released, judged as the answers judge it for a
// minimum release age of window: from the cache and the shared tier,
// asking the origin for a provider's signature time only when the engine
// is not sealed (as a listing would). version is canonical.
func (s *Inventory) KnownRelease(ctx context.Context, kind policy.Kind, address, version string, window time.Duration) (policy.Release, error) {
	return s.parts.Gate.KnownRelease(ctx, kind, address, version, window)
}

// StoredVerdict is the verdict, now, of the package policy in effect on
// version of a provider or module, with what the engine knows of its
// release (KnownRelease).
func (s *Inventory) StoredVerdict(ctx context.Context, kind policy.Kind, address, version string) policy.Verdict {
	pol := s.Policy()
	if pol == nil {
		return policy.Verdict{Allowed: true}
	}
	sub := pol.For(kind, address)
	now := s.cfg.Now()
	// The rules that need no release time (the address rules,
	// deny_version) decide before anything dates the version, which may
	// ask the origin.
	if v, final := sub.Undated(version, now); final {
		return v
	}
	var rel policy.Release
	if w := sub.Window(); w > 0 {
		r, err := s.KnownRelease(ctx, kind, address, version, w)
		if err == nil {
			rel = r
		}
	}
	return sub.Version(version, rel, now)
}
