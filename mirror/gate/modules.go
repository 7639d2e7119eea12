package gate

// The package policy on registry modules: their version lists and
// download locations.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/apparentlymart/go-versions/versions"

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
	parsed := make([]versions.Version, len(list.Versions))
	valid := make([]bool, len(list.Versions))
	for i, raw := range list.Versions {
		pv, err := addrs.ParseModuleVersion(raw)
		parsed[i], valid[i] = pv, err == nil
	}
	var rels map[versions.Version]policy.Release
	if pol.Window(policy.Module, addr) > 0 {
		rels = g.rel.moduleReleases(m, parsed, valid, list.Dates)
	}
	var next time.Time
	out := list
	for i, raw := range list.Versions {
		// A version that does not parse is judged as the origin spells
		// it: refused by any deny_version, held by the age gate (no
		// release time is known of it); no door asks for it.
		version, rel := raw, policy.Release{}
		if valid[i] {
			version, rel = parsed[i].String(), rels[parsed[i]]
		}
		v := pol.Version(policy.Module, addr, version, rel, now)
		if v.Allowed {
			if out != list {
				out.Versions = append(out.Versions, raw)
			}
			continue
		}
		if out == list {
			out = &records.ModuleVersionList{Schema: list.Schema, Versions: slices.Clone(list.Versions[:i])}
		}
		g.refused(policy.Module, addr, version, rel, v, false)
		out.Held = append(out.Held, fmt.Sprintf("%s %s is held back by the mirror's package policy: %s", addr, raw, v.Message()))
		next = earliest(next, v.AvailableAt)
	}
	return out, next, nil
}

// CheckModule refuses version v of m when the policy in effect holds it
// back: a *PolicyError. When a minimum release age applies to m and the
// engine may ask its origin, relist lists m's versions first (the
// listing that dates the version); a version no stored listing names has
// no release time known, and is held.
func (g *Gate) CheckModule(ctx context.Context, m addrs.Module, v versions.Version, relist func(context.Context) error) error {
	pol := g.Current()
	if pol == nil {
		return nil
	}
	addr := m.String()
	// The rules that need no release time decide before the relisting
	// that dates the version may ask the origin.
	if err := g.CheckUndated(policy.Module, addr, v.String()); err != nil {
		return err
	}
	var rel policy.Release
	if pol.Window(policy.Module, addr) > 0 {
		if !g.cfg.Offline && !g.parts.Hosts.Local(m.Hostname) {
			if err := relist(ctx); err != nil {
				return err
			}
		}
		rel = g.rel.moduleRelease(m, v)
	}
	version := v.String()
	verdict := pol.Version(policy.Module, addr, version, rel, g.now())
	if verdict.Allowed {
		return nil
	}
	g.refused(policy.Module, addr, version, rel, verdict, true)
	return &PolicyError{Kind: policy.Module, Address: addr, Version: version, Verdict: verdict}
}
