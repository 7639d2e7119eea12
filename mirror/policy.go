package mirror

// The package policy (package policy) applied when answering, to what is
// stored: the version lists leave out what it holds back, and the
// documents and archives of a held version fail with a *PolicyError. It
// is read on every answer, so a new policy (Engine.SetPolicy) applies to
// the next request with nothing fetched again; answers kept for reuse
// (Stamp) end when it changes, and when the clock reaches the time a
// held version becomes available.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/addrs"
	"github.com/tfmirror/tfmirror/policy"
)

// ErrPolicy matches every *PolicyError.
var ErrPolicy = errors.New("refused by the mirror's package policy")

// PolicyError is a provider, module or version the package policy does
// not let the mirror serve.
type PolicyError struct {
	Kind    policy.Kind
	Address string
	// Version is "" for a refusal of the whole address.
	Version string
	Verdict policy.Verdict
}

func (e *PolicyError) Error() string {
	what := e.Address
	if e.Version != "" {
		what += " " + e.Version
	}
	msg := fmt.Sprintf("%s %s is held back by the mirror's package policy (rule %s", e.Kind, what, e.Verdict.Rule)
	if e.Verdict.Detail != "" {
		msg += ": " + e.Verdict.Detail
	}
	return msg + "): " + e.Verdict.Message()
}

// Is makes errors.Is(err, ErrPolicy) hold.
func (e *PolicyError) Is(target error) bool { return target == ErrPolicy }

// PolicyMetrics receives the package policy's refusals: the policy side
// of Metrics.
type PolicyMetrics interface {
	// PolicyRefused counts one refusal by rule (a policy.Rule* name):
	// a document or archive refused, or a version first left out of a
	// version list.
	PolicyRefused(rule string)
}

// policyState is the engine's policy and what it has refused.
type policyState struct {
	p   atomic.Pointer[policy.Policy]
	gen atomic.Uint64 // advanced by every SetPolicy

	mu    sync.Mutex
	seen  map[heldKey]heldEntry   // refusals logged, by version and rule
	lists map[string]filteredList // the lists last filtered, by provider
	rels  map[string]datedList    // the release times of the lists last dated, by provider
}

// datedList is the release times of the versions of src under a minimum
// release age of window, all known: kept while the list and the window
// are the same. What they say stays true as the clock moves (a release
// time never changes once learned), so that a version's documents are
// judged without dating the whole list again.
type datedList struct {
	src    *VersionList
	window time.Duration
	rels   map[string]Release
}

type heldKey struct{ kind, address, version, rule string }

// maxHeldSeen bounds the refusals remembered (to log each once and list
// them); past it the memory starts again.
const maxHeldSeen = 1 << 14

// HeldBack is a refusal the package policy made.
type HeldBack struct {
	Kind    string `json:"kind"` // provider or module
	Address string `json:"address"`
	Version string `json:"version"`
	Rule    string `json:"rule"`
	Reason  string `json:"reason"`
	// AvailableAt is when an age-gated version becomes available.
	AvailableAt time.Time `json:"available_at,omitzero"`
}

// SetPolicy makes p the package policy of every answer from now on (nil:
// everything allowed). Answers kept for reuse end.
func (s *Engine) SetPolicy(p *policy.Policy) {
	s.policy.p.Store(p)
	s.policy.gen.Add(1)
}

// policyGate is the engine's package policy, what it has refused, and
// the lists it filtered.
type policyGate struct {
	e *Engine // the clock, log, metrics, records and release times
	policyState
}

// current returns the package policy in effect (nil: everything allowed).
func (g *policyGate) current() *policy.Policy { return g.p.Load() }

// HeldBack returns the versions the package policy in effect holds back
// among those it refused, or left out of a list, since the engine
// started: each judged again now (a version allowed since is not
// listed), sorted by address and version.
func (g *policyGate) heldBack() []WithheldVersion {
	s := g.e
	pol := g.current()
	now := s.cfg.Now()
	g.mu.Lock()
	seen := make([]heldEntry, 0, len(g.seen))
	for _, h := range g.seen {
		seen = append(seen, h)
	}
	g.mu.Unlock()
	var out []WithheldVersion
	done := map[heldKey]bool{}
	for _, h := range seen {
		k := heldKey{h.Kind, h.Address, h.Version, ""}
		if done[k] {
			continue
		}
		var v policy.Verdict
		if h.Version == "" {
			v = pol.Address(policy.Kind(h.Kind), h.Address)
		} else {
			v = pol.Version(policy.Kind(h.Kind), h.Address, h.Version, h.rel, now)
		}
		if v.Allowed {
			continue
		}
		done[k] = true
		kind := ""
		if h.Kind == string(policy.Module) {
			kind = h.Kind
		}
		out = append(out, WithheldVersion{Provider: h.Address, Version: h.Version, Platforms: []string{}, Kind: kind,
			Rule: v.Rule, Reason: v.Reason, AvailableAt: v.AvailableAt})
	}
	slices.SortFunc(out, func(a, b WithheldVersion) int {
		if c := strings.Compare(a.Provider, b.Provider); c != 0 {
			return c
		}
		return strings.Compare(a.Version, b.Version)
	})
	return out
}

type heldEntry struct {
	HeldBack
	rel policy.Release // the release time it was judged with
}

func (r Release) policy() policy.Release {
	return policy.Release{At: r.At, Known: r.Known, InHouse: r.InHouse}
}

// refused logs the first refusal of a version by a rule, remembers it
// for HeldBack and counts it: every time when counted, else the first.
func (g *policyGate) refused(kind policy.Kind, address, version string, rel policy.Release, v policy.Verdict, counted bool) {
	s := g.e
	k := heldKey{string(kind), address, version, v.Rule}
	h := heldEntry{HeldBack{Kind: string(kind), Address: address, Version: version, Rule: v.Rule, Reason: v.Reason, AvailableAt: v.AvailableAt}, rel}
	g.mu.Lock()
	old, logged := g.seen[k]
	if !logged && len(g.seen) >= maxHeldSeen {
		clear(g.seen)
	}
	if g.seen == nil {
		g.seen = map[heldKey]heldEntry{}
	}
	g.seen[k] = h
	g.mu.Unlock()
	if counted || !logged {
		s.metrics.PolicyRefused(v.Rule)
	}
	if logged && old.HeldBack == h.HeldBack {
		return
	}
	args := []any{"kind", string(kind), "address", address, "rule", v.Rule, "detail", v.Detail, "reason", v.Reason}
	if version != "" {
		args = append(args, "version", version)
	}
	if !v.AvailableAt.IsZero() {
		args = append(args, "available_at", v.AvailableAt.UTC().Format(time.RFC3339))
	}
	s.log.Warn("held back by the package policy", args...)
}

// generation is the part of the engine's generation that follows the
// policy: see providerRecords.generation.
func (g *policyGate) generation() uint64 { return g.gen.Load() }

// checkAddress refuses an address the policy refuses whatever the version.
func (g *policyGate) checkAddress(pol *policy.Policy, kind policy.Kind, address string) error {
	if pol == nil {
		return nil
	}
	sub := pol.For(kind, address)
	return g.checkSubject(&sub, kind, address)
}

// checkSubject is checkAddress with the policy as it applies to address.
func (g *policyGate) checkSubject(sub *policy.Subject, kind policy.Kind, address string) error {
	if v := sub.Address(); !v.Allowed {
		g.refused(kind, address, "", policy.Release{}, v, true)
		return &PolicyError{Kind: kind, Address: address, Verdict: v}
	}
	return nil
}

// filterProviderList returns list without the versions pol holds back,
// and the earliest time one of them becomes available (zero: none).
func (g *policyGate) filterProviderList(ctx context.Context, pol *policy.Policy, p addrs.Provider, list *VersionList) (*VersionList, time.Time, error) {
	s := g.e
	if pol == nil {
		return list, time.Time{}, nil
	}
	addr := p.String()
	sub := pol.For(policy.Provider, addr) // the address evaluated once for all its versions
	if err := g.checkSubject(&sub, policy.Provider, addr); err != nil {
		return nil, time.Time{}, err
	}
	now := s.cfg.Now()
	gen := g.generation()
	if f, ok := g.filtered(addr, list, gen, now); ok {
		return f.out, f.next, nil
	}
	rels := g.providerReleases(ctx, sub.Window(), p, list, now)
	var next time.Time
	out := list
	unknown := false
	for i, e := range list.Versions {
		rel := rels[e.Version]
		v := sub.Version(e.Version, rel.policy(), now)
		if v.Allowed {
			if out != list {
				out.Versions = append(out.Versions, e)
			}
			continue
		}
		if out == list {
			out = &VersionList{Schema: list.Schema, Imported: list.Imported, Versions: slices.Clone(list.Versions[:i])}
		}
		out.Held = append(out.Held, fmt.Sprintf("%s %s is held back by the mirror's package policy: %s", addr, e.Version, v.Message()))
		g.refused(policy.Provider, addr, e.Version, rel.policy(), v, false)
		next = earliest(next, v.AvailableAt)
		unknown = unknown || v.Rule == policy.RuleMinReleaseAge && !rel.Known
	}
	if !unknown {
		g.keepFiltered(addr, filteredList{src: list, gen: gen, out: out, next: next})
	}
	return out, next, nil
}

// filteredList is a version list as the policy of generation gen left
// it, kept while the list and the policy are the same and no version of
// it became available (see next).
type filteredList struct {
	src, out *VersionList
	gen      uint64
	next     time.Time
}

func (ps *policyState) filtered(addr string, src *VersionList, gen uint64, now time.Time) (filteredList, bool) {
	ps.mu.Lock()
	f, ok := ps.lists[addr]
	ps.mu.Unlock()
	if !ok || f.src != src || f.gen != gen || !f.next.IsZero() && !now.Before(f.next) {
		return filteredList{}, false
	}
	return f, true
}

func (ps *policyState) keepFiltered(addr string, f filteredList) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.lists == nil || len(ps.lists) >= maxHeldSeen {
		ps.lists = map[string]filteredList{}
	}
	ps.lists[addr] = f
}

// providerReleases returns the release times of list's versions when a
// minimum release age of w applies to p (none are needed otherwise).
func (g *policyGate) providerReleases(ctx context.Context, w time.Duration, p addrs.Provider, list *VersionList, now time.Time) map[string]Release {
	s := g.e
	addr := p.String()
	if w <= 0 {
		return nil
	}
	g.mu.Lock()
	d, ok := g.rels[addr]
	g.mu.Unlock()
	if ok && d.src == list && d.window == w {
		return d.rels
	}
	rels := s.releases.providerReleases(ctx, p, list, w, now)
	for _, r := range rels {
		if !r.Known {
			return rels // asked again next time
		}
	}
	g.mu.Lock()
	if g.rels == nil || len(g.rels) >= maxHeldSeen {
		g.rels = map[string]datedList{}
	}
	g.rels[addr] = datedList{src: list, window: w, rels: rels}
	g.mu.Unlock()
	return rels
}

// checkProviderVersion refuses version v of p when pol holds it back;
// list is p's version list (it dates v).
func (g *policyGate) checkProviderVersion(ctx context.Context, p addrs.Provider, v versions.Version, list *VersionList) error {
	s := g.e
	pol := g.current()
	if pol == nil {
		return nil
	}
	addr := p.String()
	sub := pol.For(policy.Provider, addr)
	if err := g.checkSubject(&sub, policy.Provider, addr); err != nil {
		return err
	}
	now := s.cfg.Now()
	var rel Release
	if list != nil {
		rel = g.providerReleases(ctx, sub.Window(), p, list, now)[v.String()]
	}
	verdict := sub.Version(v.String(), rel.policy(), now)
	if verdict.Allowed {
		return nil
	}
	g.refused(policy.Provider, addr, v.String(), rel.policy(), verdict, true)
	return &PolicyError{Kind: policy.Provider, Address: addr, Version: v.String(), Verdict: verdict}
}

// checkProvider is checkProviderVersion reading p's version list.
func (g *policyGate) checkProvider(ctx context.Context, p addrs.Provider, v versions.Version) error {
	s := g.e
	pol := g.current()
	if pol == nil {
		return nil
	}
	var list *VersionList
	if pol.Window(policy.Provider, p.String()) > 0 {
		l, _, err := s.records.versions(ctx, p, false)
		if err != nil {
			return err
		}
		list = l
	}
	return g.checkProviderVersion(ctx, p, v, list)
}

// filterModuleList returns the versions of list that pol lets through,
// and the earliest time a held one becomes available.
func (s *Modules) filterModuleList(ctx context.Context, pol *policy.Policy, m addrs.Module, list *ModuleVersionList) (*ModuleVersionList, time.Time, error) {
	if pol == nil {
		return list, time.Time{}, nil
	}
	addr := m.String()
	if err := s.e.policy.checkAddress(pol, policy.Module, addr); err != nil {
		return nil, time.Time{}, err
	}
	now := s.cfg.Now()
	rels := s.moduleReleases(pol, m, list.Versions)
	var next time.Time
	out := list
	for i, raw := range list.Versions {
		v := pol.Version(policy.Module, addr, canonicalModuleVersion(raw), rels[raw].policy(), now)
		if v.Allowed {
			if out != list {
				out.Versions = append(out.Versions, raw)
			}
			continue
		}
		if out == list {
			out = &ModuleVersionList{Schema: list.Schema, Versions: slices.Clone(list.Versions[:i])}
		}
		s.e.policy.refused(policy.Module, addr, canonicalModuleVersion(raw), rels[raw].policy(), v, false)
		out.Held = append(out.Held, fmt.Sprintf("%s %s is held back by the mirror's package policy: %s", addr, raw, v.Message()))
		next = earliest(next, v.AvailableAt)
	}
	return out, next, nil
}

// moduleReleases returns the release times of m's versions when a
// minimum release age applies to m.
func (s *Modules) moduleReleases(pol *policy.Policy, m addrs.Module, list []string) map[string]Release {
	if pol.Window(policy.Module, m.String()) <= 0 {
		return nil
	}
	return s.e.releases.moduleReleases(m, list, func(v string) bool {
		var rec ModuleRecord
		_, err := s.store.GetMeta(moduleRecordKey(m, v), &rec)
		return err == nil && rec.Provenance == ProvenanceUnsigned
	})
}

// checkModule refuses version of m when the policy holds it back.
func (s *Modules) checkModule(ctx context.Context, m addrs.Module, version string) error {
	pol := s.e.policy.current()
	if pol == nil {
		return nil
	}
	addr := m.String()
	if err := s.e.policy.checkAddress(pol, policy.Module, addr); err != nil {
		return err
	}
	var rel Release
	if pol.Window(policy.Module, addr) > 0 {
		rel = Release{Known: true}
		if !s.cfg.Offline && !s.e.local(m.Hostname) {
			// The listing that dates the version.
			if _, _, err := s.moduleVersions(ctx, m); err != nil {
				return err
			}
		}
		rel = s.moduleReleases(pol, m, []string{version})[version]
	}
	now := s.cfg.Now()
	v := pol.Version(policy.Module, addr, canonicalModuleVersion(version), rel.policy(), now)
	if v.Allowed {
		return nil
	}
	s.e.policy.refused(policy.Module, addr, canonicalModuleVersion(version), rel.policy(), v, true)
	return &PolicyError{Kind: policy.Module, Address: addr, Version: canonicalModuleVersion(version), Verdict: v}
}

func earliest(a, b time.Time) time.Time {
	if b.IsZero() || !a.IsZero() && a.Before(b) {
		return a
	}
	return b
}

// gated returns st ending at until when that comes first (a held version
// becomes available then).
func gated(st Stamp, until time.Time) Stamp {
	if st.kind == stampNone || until.IsZero() {
		return st
	}
	if st.until.IsZero() || until.Before(st.until) {
		st.until = until
	}
	return st
}
