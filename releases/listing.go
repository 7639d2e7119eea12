package releases

// What the package policy judges the releases side's answers by: the
// address a product is named by, and the listing rule's time of a
// version. The policy itself is applied above, by mirror/served.Releases,
// the layer every way in reaches the CLI releases through.
//
// A CLI product is judged as a provider address of its publisher's
// layout, so that the policy file's allow, deny, deny_version and
// minimum_release_age rules name it as they name providers:
// releases.hashicorp.com/hashicorp/PRODUCT for HashiCorp's products and
// get.opentofu.org/opentofu/tofu for OpenTofu, whatever origin URLs are
// configured.
//
// A version's release time is the later of two times, as for providers
// (mirror/gate): the creation time of its SHA256SUMS signature
// (Sums.SignedAt), and the time of the last list fetched before the one
// that first listed it (ListingTime; a version in the first list ever
// fetched has none). StoredRelease is that time from the cache alone.

import (
	"time"

	"github.com/tfmirror/tfmirror/v2/policy"
)

// Address is the address the package policy judges a product by.
func Address(pub Publisher, product string) string {
	if pub == OpenTofu {
		return "get.opentofu.org/opentofu/" + product
	}
	return "releases.hashicorp.com/hashicorp/" + product
}

// ListingTime is the listing rule's time of a version: the time of the
// last list fetched before the one that first listed it; zero when none.
func (r *Releases) ListingTime(pub Publisher, product, version string) time.Time {
	var at time.Time
	if _, err := r.store.GetMeta(absentKey(pub, product, version), &at); err != nil {
		return time.Time{}
	}
	return at
}

// StoredRelease is the release time of a version as the cache dates it,
// asking no origin: its stored SHA256SUMS signature's creation time, or
// the listing rule's time when later. Not Known when the cache holds no
// verified SHA256SUMS of the version.
func (r *Releases) StoredRelease(pub Publisher, product, version string) policy.Release {
	rel := policy.Release{At: r.ListingTime(pub, product, version)}
	if s, err := r.HeldSums(pub, product, version); err == nil {
		rel.Known = true
		if s.SignedAt.After(rel.At) {
			rel.At = s.SignedAt
		}
	}
	return rel
}

func absentKey(pub Publisher, product, version string) string {
	return "releases/absent/" + string(pub) + "/" + product + "/" + version
}

// noteListing records, for each version next lists that prev did not,
// prev's time (now, when prev's is ahead of the clock): the version was
// not yet released then. A version prev lists and next does not (an
// origin's list that lacks it for a while) keeps the time it has, zero
// for one of the first list: its record is written then, so that a list
// that has it again is not taken for the one that first listed it.
func (r *Releases) noteListing(pub Publisher, product string, prev, next *List) {
	// once stores at as version's listing time unless it has one:
	// written once.
	once := func(version string, at time.Time) {
		key := absentKey(pub, product, version)
		var had time.Time
		if _, err := r.store.GetMeta(key, &had); err == nil {
			return
		}
		if err := r.store.PutMeta(key, at); err != nil {
			r.log.Warn("could not store a release's listing time", "publisher", string(pub), "product", product, "version", version, "error", err)
		}
	}
	had := make(map[string]bool, len(prev.Versions))
	for _, l := range prev.Versions {
		had[l.Version] = true
	}
	// A list fetched while the clock was ahead (set forward, then back)
	// dates what the next lists no later than now: it was published
	// before now.
	at := prev.At
	if now := r.cfg.Now(); at.After(now) {
		at = now
	}
	has := make(map[string]bool, len(next.Versions))
	for _, l := range next.Versions {
		has[l.Version] = true
		if !had[l.Version] {
			once(l.Version, at)
		}
	}
	for _, l := range prev.Versions {
		if !has[l.Version] {
			once(l.Version, time.Time{})
		}
	}
}
