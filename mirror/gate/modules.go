package gate

// The package policy on registry modules: their version lists and
// download locations.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// FilterModules returns the versions of list that the policy in effect
// lets through (with why the others are left out, in Held), and the
// earliest time a held one becomes available. A list handed in is never
// modified.
func (g *Gate) FilterModules(m addrs.Module, list *records.ModuleVersionList) (*records.ModuleVersionList, time.Time, error) {
	pol := g.Current()
	if pol == nil {
		return list, time.Time{}, nil
	}
	addr := m.String()
	if err := g.checkAddress(pol, policy.Module, addr); err != nil {
		return nil, time.Time{}, err
	}
	now := g.now()
	rels := g.moduleReleases(pol, m, list.Versions)
	var next time.Time
	out := list
	for i, raw := range list.Versions {
		version := records.CanonicalModuleVersion(raw)
		v := pol.Version(policy.Module, addr, version, rels[version], now)
		if v.Allowed {
			if out != list {
				out.Versions = append(out.Versions, raw)
			}
			continue
		}
		if out == list {
			out = &records.ModuleVersionList{Schema: list.Schema, Versions: slices.Clone(list.Versions[:i])}
		}
		g.refused(policy.Module, addr, version, rels[version], v, false)
		out.Held = append(out.Held, fmt.Sprintf("%s %s is held back by the mirror's package policy: %s", addr, raw, v.Message()))
		next = earliest(next, v.AvailableAt)
	}
	return out, next, nil
}

// moduleReleases returns the release times of m's versions, keyed by
// the canonical version, when a minimum release age applies to m.
func (g *Gate) moduleReleases(pol *policy.Policy, m addrs.Module, list []string) map[string]policy.Release {
	if pol.Window(policy.Module, m.String()) <= 0 {
		return nil
	}
	return g.rel.moduleReleases(m, list)
}

// CheckModule refuses version of m when the policy in effect holds it
// back: a *PolicyError. When a minimum release age applies to m and the
// engine may ask its origin, relist lists m's versions first (the
// listing that dates the version).
func (g *Gate) CheckModule(ctx context.Context, m addrs.Module, version string, relist func(context.Context) error) error {
	pol := g.Current()
	if pol == nil {
		return nil
	}
	addr := m.String()
	if err := g.checkAddress(pol, policy.Module, addr); err != nil {
		return err
	}
	canonical := records.CanonicalModuleVersion(version)
	var rel policy.Release
	if pol.Window(policy.Module, addr) > 0 {
		if !g.cfg.Offline && !g.parts.Hosts.Local(m.Hostname) {
			if err := relist(ctx); err != nil {
				return err
			}
		}
		rel = g.moduleReleases(pol, m, []string{canonical})[canonical]
	}
	v := pol.Version(policy.Module, addr, canonical, rel, g.now())
	if v.Allowed {
		return nil
	}
	g.refused(policy.Module, addr, canonical, rel, v, true)
	return &PolicyError{Kind: policy.Module, Address: addr, Version: canonical, Verdict: v}
}
