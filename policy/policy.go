package policy

import (
	"fmt"
	"slices"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/hashicorp/hcl/v2"
)

// The rules a refusal names (Verdict.Rule): stable, for metric labels.
const (
	RuleAllowList     = "allow_list"      // a non-empty allow list does not name the address
	RuleDeny          = "deny"            // a deny pattern names the address
	RuleDenyVersion   = "deny_version"    // a deny_version block names the version
	RuleMinReleaseAge = "min_release_age" // the version is younger than its minimum release age, or its release time is not known yet
)

// Release is what is known of when a version was released.
type Release struct {
	// At is the release time, when Known.
	At time.Time
	// Known is false when the release time has not been learned yet.
	Known bool
	// InHouse is set for a version imported without a signature from a
	// host of --allow-unsigned-hosts: the operator's own build, which no
	// minimum release age holds back.
	InHouse bool
}

// Verdict is the policy's answer for an address or a version.
type Verdict struct {
	// Allowed is whether it may be served.
	Allowed bool
	// Rule is, for a refusal, the kind of rule that refused it (one of
	// the Rule constants); empty when allowed.
	Rule string
	// Detail is the deciding rule as the operator wrote it, with its
	// file:line ("deny \"registry.test/acme/*\" (mirror.hcl:3)"); for an
	// allowed answer, what let it through, or empty when no rule applied.
	Detail string
	// Reason is for the people who hit a refusal: the operator's reason
	// of a deny_version block, or a sentence naming the rule.
	Reason string
	// AvailableAt is, for a version held by its minimum release age whose
	// release time is known, when it becomes available; zero otherwise.
	AvailableAt time.Time
}

// Message is the refusal as a client may show it: the reason and, for
// the age gate, when the version becomes available.
func (v Verdict) Message() string {
	if v.Allowed {
		return ""
	}
	if !v.AvailableAt.IsZero() {
		return v.Reason + "; available at " + v.AvailableAt.UTC().Format(time.RFC3339)
	}
	return v.Reason
}

// Policy is a decoded policy: immutable, safe for concurrent use. A nil
// *Policy allows everything.
type Policy struct {
	allow        patternList
	deny         patternList
	exemptions   patternList
	denyVer      versionRules
	exemptVer    versionRules
	windows      []window
	windowIdx    [2]index
	minAge       time.Duration
	minAgeText   string
	minAgeRng    hcl.Range
	minAgeSet    bool
	minAgeDetail string
	rules        int
}

// patternList is a list of patterns with their index, per kind.
type patternList struct {
	attr string    // the attribute's name
	rng  hcl.Range // the attribute's place
	pats []pattern
	idx  [2]index // providers, modules
}

func kindSlot(n int) int { return n - 3 }

func (l *patternList) add(p pattern) {
	l.pats = append(l.pats, p)
	l.idx[kindSlot(p.n)].add(&l.pats[len(l.pats)-1], len(l.pats)-1)
}

// first is the first pattern of l, in the order written, that matches a.
func (l *patternList) first(a key) *pattern {
	best := -1
	l.idx[kindSlot(a.n)].candidates(a, func(i int) bool {
		if (best < 0 || i < best) && l.pats[i].matches(a) {
			best = i
		}
		return true
	})
	if best < 0 {
		return nil
	}
	return &l.pats[best]
}

func (l *patternList) names(n int) bool {
	for i := range l.pats {
		if l.pats[i].n == n {
			return true
		}
	}
	return false
}

// versionRule is a deny_version or release_age_exempt_version block.
type versionRule struct {
	block    string
	pattern  pattern
	versions string
	set      versions.Set
	reason   string
	rng      hcl.Range
	order    int // its place in the list
}

func (r *versionRule) detail() string {
	return r.pattern.detail
}

type versionRules struct {
	rules []versionRule
	idx   [2]index
}

func (l *versionRules) add(r versionRule) {
	r.order = len(l.rules)
	l.rules = append(l.rules, r)
	l.idx[kindSlot(r.pattern.n)].add(&l.rules[len(l.rules)-1].pattern, len(l.rules)-1)
}

// matching is the rules whose pattern matches a, in the order written
// (nil, without allocating, when none does).
func (l *versionRules) matching(a key) []*versionRule {
	var out []*versionRule
	l.idx[kindSlot(a.n)].candidates(a, func(i int) bool {
		if l.rules[i].pattern.matches(a) {
			out = append(out, &l.rules[i])
		}
		return true
	})
	slices.SortFunc(out, func(x, y *versionRule) int { return x.order - y.order })
	return out
}

// window is a release_age block.
type window struct {
	pattern pattern
	minimum time.Duration
	text    string
	rng     hcl.Range
}

// Len is the number of rules: each pattern of allow, deny and
// release_age_exemptions, each block, and minimum_release_age.
func (p *Policy) Len() int {
	if p == nil {
		return 0
	}
	return p.rules
}

// Address is the verdict on an address, whatever the version: deny
// patterns first (a deny beats an allow), then the allow list (when it
// names any pattern, an address it does not match is refused; an allow
// list of provider patterns only refuses every module, and the other way
// round). address is HOST/NAMESPACE/TYPE for a provider,
// HOST/NAMESPACE/NAME/SYSTEM for a module; one that does not parse is
// refused.
func (p *Policy) Address(kind Kind, address string) Verdict {
	if p == nil {
		return Verdict{Allowed: true}
	}
	a, err := addressKey(kind, address)
	if err != nil {
		return Verdict{Rule: RuleDeny, Detail: err.Error(), Reason: "not a valid " + string(kind) + " address"}
	}
	return p.address(a)
}

func (p *Policy) address(a key) Verdict {
	if m := p.deny.first(a); m != nil {
		reason := m.reason
		if reason == "" {
			reason = "denied by the mirror's policy"
		}
		return Verdict{Rule: RuleDeny, Detail: patternDetail("deny", m), Reason: reason}
	}
	if len(p.allow.pats) == 0 {
		return Verdict{Allowed: true}
	}
	if m := p.allow.first(a); m != nil {
		return Verdict{Allowed: true, Detail: patternDetail("allow", m)}
	}
	what := "provider"
	if a.n == 4 {
		what = "module"
	}
	detail := "allow (" + place(p.allow.rng) + "): no pattern matches"
	if !p.allow.names(a.n) {
		detail = "allow (" + place(p.allow.rng) + "): names no " + what + " pattern"
	}
	return Verdict{Rule: RuleAllowList, Detail: detail, Reason: "not in the mirror's allow list"}
}

// Window is the minimum release age that applies to the address: zero
// when a release_age_exemptions pattern matches it; else the minimum of
// the most specific release_age block whose pattern matches (fewest *,
// then first written); else minimum_release_age (zero when unset).
func (p *Policy) Window(kind Kind, address string) time.Duration {
	if p == nil {
		return 0
	}
	a, err := addressKey(kind, address)
	if err != nil {
		return p.minAge
	}
	d, _, _ := p.window(a)
	return d
}

// window is Window, the rule that decides it and the age as written.
func (p *Policy) window(a key) (d time.Duration, detail, text string) {
	if m := p.exemptions.first(a); m != nil {
		return 0, patternDetail("release_age_exemptions", m), ""
	}
	best, bestW := -1, 0
	p.windowIdx[kindSlot(a.n)].candidates(a, func(i int) bool {
		w := &p.windows[i]
		if !w.pattern.matches(a) {
			return true
		}
		if n := w.pattern.wildcards(); best < 0 || n < bestW || n == bestW && i < best {
			best, bestW = i, n
		}
		return true
	})
	if best >= 0 {
		w := &p.windows[best]
		return w.minimum, w.pattern.detail, w.text
	}
	if p.minAgeSet {
		return p.minAge, p.minAgeDetail, p.minAgeText
	}
	return 0, "", ""
}

// Subject is the policy as it applies to one address: what does not
// depend on the version is evaluated once, so that a list of versions
// costs one Version call each and no more look-ups. The zero Subject
// (and one of a nil Policy) allows everything.
type Subject struct {
	kind    Kind     // whose versions are parsed (Kind.ParseVersion)
	refused *Verdict // the address's refusal, if any
	allowed string   // what let the address through, when nothing else applies
	deny    []*versionRule
	exempt  []*versionRule
	window  time.Duration
	wdetail string
	wtext   string
}

// For is the policy as it applies to address, for asking about many of
// its versions; see Version.
func (p *Policy) For(kind Kind, address string) Subject {
	if p == nil {
		return Subject{}
	}
	a, err := addressKey(kind, address)
	if err != nil {
		return Subject{refused: &Verdict{Rule: RuleDeny, Detail: err.Error(), Reason: "not a valid " + string(kind) + " address"}}
	}
	v := p.address(a)
	if !v.Allowed {
		return Subject{refused: &v}
	}
	s := Subject{kind: kind, allowed: v.Detail, deny: p.denyVer.matching(a)}
	s.window, s.wdetail, s.wtext = p.window(a)
	if s.window > 0 {
		s.exempt = p.exemptVer.matching(a)
	}
	return s
}

// Address is the verdict on the address itself (Policy.Address).
func (s *Subject) Address() Verdict {
	if s.refused != nil {
		return *s.refused
	}
	return Verdict{Allowed: true, Detail: s.allowed}
}

// Window is the minimum release age that applies (Policy.Window); zero
// for a refused address.
func (s *Subject) Window() time.Duration { return s.window }

// Undated is the verdict on version with its release time not known, and
// whether it is final: whether no release time can change it (the
// address rules, deny_version, an exemption, no minimum release age).
// Only a hold by the minimum release age is not final: it is judged
// again once the version is dated. It lets a caller decide what it can
// before it asks anything (an origin) to date the version.
func (s *Subject) Undated(version string, now time.Time) (v Verdict, final bool) {
	v = s.Version(version, Release{}, now)
	return v, v.Allowed || v.Rule != RuleMinReleaseAge
}

// Version is Policy.Version for the subject's address.
func (s *Subject) Version(version string, rel Release, now time.Time) Verdict {
	if s.refused != nil {
		return *s.refused
	}
	var v versions.Version
	if len(s.deny) > 0 || len(s.exempt) > 0 {
		var err error
		if v, err = s.kind.ParseVersion(version); err != nil {
			if len(s.deny) > 0 {
				return Verdict{Rule: RuleDenyVersion, Detail: fmt.Sprintf("version %q is not a valid version, so %s cannot be checked", version, s.deny[0].detail()), Reason: "not a valid version"}
			}
			v = versions.Unspecified // holds in no constraint
		}
	}
	for _, r := range s.deny {
		if r.set.Has(v.Comparable()) { // every build of a release (parseVersions)
			return Verdict{Rule: RuleDenyVersion, Detail: r.detail(), Reason: r.reason}
		}
	}
	if s.window == 0 {
		if s.wdetail != "" {
			return Verdict{Allowed: true, Detail: s.wdetail}
		}
		return Verdict{Allowed: true, Detail: s.allowed}
	}
	if rel.InHouse {
		return Verdict{Allowed: true, Detail: "in-house build (imported unsigned under a host that is no allowed origin, or one of --allow-unsigned-hosts): no minimum release age applies"}
	}
	for _, r := range s.exempt {
		if r.set.Has(v) {
			return Verdict{Allowed: true, Detail: r.detail(), Reason: r.reason}
		}
	}
	if !rel.Known {
		return Verdict{Rule: RuleMinReleaseAge, Detail: s.wdetail, Reason: "held back by the mirror's minimum release age of " + s.wtext + ": its release time is not known yet"}
	}
	if at := rel.At.Add(s.window); now.Before(at) {
		return Verdict{Rule: RuleMinReleaseAge, Detail: s.wdetail, Reason: "held back by the mirror's minimum release age of " + s.wtext, AvailableAt: at}
	}
	return Verdict{Allowed: true, Detail: s.wdetail}
}

// Version is the verdict on one version of an address released at rel,
// evaluated at now, in this order; the first rule that decides wins:
//
//  1. Address: a deny pattern refuses (deny); a non-empty allow list that
//     does not match refuses (allow_list).
//  2. deny_version: the first block, in the order written, whose pattern
//     matches and whose versions hold the version refuses (deny_version),
//     with its reason. Its constraint holds prereleases within its bounds.
//  3. The age gate, when Window is not zero: an in-house build passes; a
//     release_age_exempt_version block whose pattern matches and whose
//     versions hold the version passes (a prerelease only when named
//     exactly); a version whose release time is not known is held
//     (min_release_age, no AvailableAt) until it is learned; one released
//     less than the window before now is held until At + window
//     (min_release_age, AvailableAt).
//  4. Otherwise it is allowed.
//
// A version that does not parse is refused when a deny_version block
// names its address, since the block cannot be checked. A module's
// version is parsed as the module registries spell it
// (addrs.ParseModuleVersion: "v1.1.0" is 1.1.0), a provider's as
// addrs.ParseSemver.
func (p *Policy) Version(kind Kind, address, version string, rel Release, now time.Time) Verdict {
	s := p.For(kind, address)
	return s.Version(version, rel, now)
}

func patternDetail(_ string, m *pattern) string {
	return m.detail
}

// place is a range as file:line.
func place(r hcl.Range) string {
	if r.Filename == "" {
		return fmt.Sprintf("line %d", r.Start.Line)
	}
	return fmt.Sprintf("%s:%d", r.Filename, r.Start.Line)
}

// Rules describes each rule of p, one line each, in the order of
// evaluation (deny, allow, deny_version, then the age gate's rules), each
// with its place in the file: what `tfmirror config check` shows.
func (p *Policy) Rules() []string {
	if p == nil {
		return nil
	}
	var out []string
	for _, l := range []*patternList{&p.deny, &p.allow} {
		for i := range l.pats {
			if r := l.pats[i].reason; r != "" {
				out = append(out, l.pats[i].detail+": "+r)
				continue
			}
			out = append(out, l.pats[i].detail)
		}
	}
	for i := range p.denyVer.rules {
		r := &p.denyVer.rules[i]
		out = append(out, fmt.Sprintf("%s: %s", r.pattern.detail, r.reason))
	}
	for i := range p.exemptions.pats {
		out = append(out, p.exemptions.pats[i].detail)
	}
	for i := range p.exemptVer.rules {
		out = append(out, p.exemptVer.rules[i].pattern.detail)
	}
	for i := range p.windows {
		out = append(out, p.windows[i].pattern.detail)
	}
	if p.minAgeSet {
		out = append(out, p.minAgeDetail)
	}
	return out
}
