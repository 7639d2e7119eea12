package releases

// The package policy on the releases side, in one place: every answer of
// Releases goes through checkAddress, checkVersion or filterList.
//
// A CLI product is judged as a provider address of its publisher's
// layout, so that the policy file's allow, deny, deny_version and
// minimum_release_age rules name it as they name providers:
// releases.hashicorp.com/hashicorp/PRODUCT for HashiCorp's products and
// get.opentofu.org/opentofu/tofu for OpenTofu, whatever origin URLs are
// configured.
//
// A version's release time is the later of two times, as for providers
// (mirror/gate): the creation time of its SHA256SUMS signature, and the
// time of the last list fetched before the one that first listed it (the
// listing rule; a version in the first list ever fetched has none).

import (
	"context"
	"time"

	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// maxLookupsPerList bounds the SHA256SUMS fetched to date the versions of
// one list; the versions left undated are held until a later list.
const maxLookupsPerList = 4

// Address is the address the package policy judges a product by.
func Address(pub Publisher, product string) string {
	if pub == OpenTofu {
		return "get.opentofu.org/opentofu/" + product
	}
	return "releases.hashicorp.com/hashicorp/" + product
}

func (r *Releases) refuse(pub Publisher, product, version string, v policy.Verdict) error {
	r.metrics.CLIRefused(string(pub), product, v.Rule)
	r.log.Warn("held back by the package policy", "kind", "cli", "address", Address(pub, product), "version", version,
		"rule", v.Rule, "detail", v.Detail, "reason", v.Reason)
	return &gate.PolicyError{Kind: "cli", Address: Address(pub, product), Version: version, Verdict: v}
}

// checkAddress refuses a product the policy refuses whatever the version.
func (r *Releases) checkAddress(pub Publisher, product string) error {
	pol := r.engine.Policy()
	if pol == nil {
		return nil
	}
	if v := pol.Address(policy.Provider, Address(pub, product)); !v.Allowed {
		return r.refuse(pub, product, "", v)
	}
	return nil
}

// checkVersion refuses a version the policy holds back, dated by its
// signature and the listing rule.
func (r *Releases) checkVersion(pub Publisher, product, version string, signedAt time.Time) error {
	pol := r.engine.Policy()
	if pol == nil {
		return nil
	}
	rel := policy.Release{At: later(signedAt, r.absent(pub, product, version)), Known: true}
	if v := pol.Version(policy.Provider, Address(pub, product), version, rel, r.cfg.Now()); !v.Allowed {
		return r.refuse(pub, product, version, v)
	}
	return nil
}

// filterList leaves out of list the versions the policy holds back. A
// version's signature time is learnt from the cache, else from the
// origin for the newest versions only (maxLookupsPerList), until one is
// old enough: the older ones are taken to be as old.
func (r *Releases) filterList(ctx context.Context, pub Publisher, product string, list *List) *List {
	pol := r.engine.Policy()
	if pol == nil {
		return list
	}
	addr := Address(pub, product)
	sub := pol.For(policy.Provider, addr)
	window := sub.Window()
	now := r.cfg.Now()
	out := &List{At: list.At, Schema: list.Schema}
	lookups, oldEnough := 0, false
	for _, l := range list.Versions {
		rel := policy.Release{At: r.absent(pub, product, l.Version), Known: true}
		if window > 0 && !oldEnough {
			var signed time.Time
			if s, err := r.heldSums(pub, product, l.Version); err == nil {
				signed = s.SignedAt
			} else if lookups < maxLookupsPerList && !r.cfg.Offline {
				lookups++
				if s, err := r.sumsOf(ctx, pub, product, l.Version); err == nil {
					signed = s.SignedAt
				}
			}
			if signed.IsZero() {
				rel.Known = false
			} else {
				rel.At = later(rel.At, signed)
				oldEnough = now.Sub(signed) >= window
			}
		}
		if v := sub.Version(l.Version, rel, now); v.Allowed {
			out.Versions = append(out.Versions, l)
		}
	}
	return out
}

// absent is the listing rule's time of a version: zero when none.
func (r *Releases) absent(pub Publisher, product, version string) time.Time {
	var at time.Time
	if _, err := r.store.GetMeta(absentKey(pub, product, version), &at); err != nil {
		return time.Time{}
	}
	return at
}

func absentKey(pub Publisher, product, version string) string {
	return "releases/absent/" + string(pub) + "/" + product + "/" + version
}

// noteListing records, for each version next lists that prev did not,
// prev's time: the version was not yet released then.
func (r *Releases) noteListing(pub Publisher, product string, prev, next *List) {
	had := make(map[string]bool, len(prev.Versions))
	for _, l := range prev.Versions {
		had[l.Version] = true
	}
	for _, l := range next.Versions {
		if had[l.Version] {
			continue
		}
		key := absentKey(pub, product, l.Version)
		var at time.Time
		if _, err := r.store.GetMeta(key, &at); err == nil {
			continue // written once
		}
		if err := r.store.PutMeta(key, prev.At); err != nil {
			r.log.Warn("could not store a release's listing time", "publisher", string(pub), "product", product, "version", l.Version, "error", err)
		}
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
