package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/apparentlymart/go-versions/versions/constraints"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/duration"
	"github.com/tfmirror/tfmirror/v2/internal/hclfile"
)

// maxAge bounds a minimum release age: ten years is far above any
// cooldown and keeps At + window from overflowing.
const maxAge = 3650 * 24 * time.Hour

var bodySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "allow"},
		{Name: "deny"},
		{Name: "minimum_release_age"},
		{Name: "release_age_exemptions"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "deny_version", LabelNames: []string{"address"}},
		{Type: "release_age", LabelNames: []string{"pattern"}},
		{Type: "release_age_exempt_version", LabelNames: []string{"address"}},
	},
}

var (
	denyVersionSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "versions", Required: true},
		{Name: "reason", Required: true},
	}}
	exemptVersionSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "versions", Required: true},
		{Name: "reason"},
	}}
	releaseAgeSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "minimum", Required: true},
	}}
)

// Names are the attributes and block types a policy block holds, for
// the hint a configuration file gets when it puts one outside.
func Names() []string {
	var out []string
	for _, a := range bodySchema.Attributes {
		out = append(out, a.Name)
	}
	for _, b := range bodySchema.Blocks {
		out = append(out, b.Type)
	}
	return out
}

// hint adds a "did you mean" to the diagnostics of names a policy block
// does not hold, when one of its own is near and HCL suggested none.
func hint(diags hcl.Diagnostics) {
	for _, d := range diags {
		name, suggested := hclfile.UnknownName(d)
		if name == "" || suggested {
			continue
		}
		if s := hclfile.Suggest(name, Names()); s != "" {
			d.Detail += fmt.Sprintf(" Did you mean %q?", s)
		} else {
			d.Detail += " A policy block holds " + strings.Join(Names(), ", ") + "."
		}
	}
}

// Decode reads the body of a `policy` block, in HCL's native or JSON
// syntax:
//
//	policy {
//	  allow = ["registry.terraform.io/hashicorp/*", "registry.example.com/acme/*/*"]
//	  deny  = ["registry.terraform.io/hashicorp/null"]
//	  deny_version "registry.terraform.io/hashicorp/aws" {
//	    versions = ">= 5.80.0, < 5.81.1"
//	    reason   = "CVE-2026-1234: use 5.81.1"
//	  }
//	  minimum_release_age    = "72h"
//	  release_age_exemptions = ["registry.example.com/acme/*"]
//	  release_age "registry.terraform.io/*/*" { minimum = "24h" }
//	  release_age_exempt_version "registry.terraform.io/hashicorp/aws" {
//	    versions = "= 5.81.1"
//	    reason   = "urgent fix for CVE-2026-1234"
//	  }
//	}
//
// A pattern is HOST/NAMESPACE/TYPE (a provider) or
// HOST/NAMESPACE/NAME/SYSTEM (a module), each part a name or "*" for any
// one part. versions is a Terraform version constraint (its commas mean
// "and") or a list of them (any one holds); ages are Go
// durations ("72h", "90m") or whole days ("3d"); a reason is one line of
// at most 1024 bytes without control or format characters, and a
// constraint that holds no version is a mistake, as are an empty allow
// list and a rule that names what one written before it names (a
// pattern twice in a list, two blocks of one type, pattern and versions,
// two release_age blocks of one pattern). Every mistake is
// reported with its file:line; a body with errors yields no policy. A
// nil body yields a nil Policy, which allows everything.
func Decode(body hcl.Body) (*Policy, hcl.Diagnostics) {
	if body == nil {
		return nil, nil
	}
	content, diags := body.Content(bodySchema)
	hint(diags)
	p := &Policy{}
	for _, l := range []struct {
		name string
		list *patternList
	}{
		{"allow", &p.allow},
		{"deny", &p.deny},
		{"release_age_exemptions", &p.exemptions},
	} {
		l.list.attr = l.name
		attr, ok := content.Attributes[l.name]
		if !ok {
			continue
		}
		l.list.rng = attr.NameRange
		pats, ds := decodePatterns(attr, l.name == "deny")
		diags = append(diags, ds...)
		if l.name == "allow" && len(pats) == 0 && !ds.HasErrors() {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Empty allow list",
				Detail:  "allow = [] names no pattern, which may be read as \"nothing comes in\" as well as \"no allow list\": to let everything in, leave allow out; to let nothing in, write deny = [\"*/*/*\", \"*/*/*/*\"]",
				Subject: attr.Expr.Range().Ptr()})
		}
		seen := map[key]pattern{}
		for _, pt := range pats {
			if first, ok := seen[pt.key]; ok {
				diags = append(diags, duplicate(l.name+" pattern", fmt.Sprintf("%q", pt.text), fmt.Sprintf("%q", first.text), first.rng, first.reason != pt.reason, pt.rng))
				continue
			}
			seen[pt.key] = pt
			pt.detail = fmt.Sprintf("%s %q (%s)", l.name, pt.text, place(pt.rng))
			l.list.add(pt)
			p.rules++
		}
	}
	if attr, ok := content.Attributes["minimum_release_age"]; ok {
		d, text, ds := decodeAge(attr)
		diags = append(diags, ds...)
		p.minAge, p.minAgeText, p.minAgeRng, p.minAgeSet = d, text, attr.NameRange, true
		p.minAgeDetail = fmt.Sprintf("minimum_release_age = %q (%s)", text, place(attr.NameRange))
		p.rules++
	}
	// The blocks written so far, by type, pattern and (for the version
	// rules) the versions they hold: one naming the same again is refused.
	type blockKey struct {
		typ      string
		pattern  key
		versions string
	}
	type written struct {
		text, versions, reason string
		minimum                time.Duration // a release_age block's
		rng                    hcl.Range
	}
	blocks := map[blockKey]written{}
	for _, b := range content.Blocks {
		pt, err := compilePattern(b.Labels[0])
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid " + b.Type + " pattern", Detail: err.Error(), Subject: b.LabelRanges[0].Ptr()})
			continue
		}
		p.rules++
		switch b.Type {
		case "release_age":
			c, ds := b.Body.Content(releaseAgeSchema)
			diags = append(diags, ds...)
			if attr, ok := c.Attributes["minimum"]; ok {
				d, text, ds := decodeAge(attr)
				diags = append(diags, ds...)
				k := blockKey{typ: b.Type, pattern: pt.key}
				if first, ok := blocks[k]; ok {
					// One minimum spelled two ways ("1d", "24h") is the same.
					diags = append(diags, duplicate("release_age block", fmt.Sprintf("%q", pt.text), fmt.Sprintf("%q", first.text), first.rng, first.minimum != d, b.DefRange))
					continue
				}
				blocks[k] = written{text: pt.text, minimum: d, rng: b.DefRange}
				pt.detail = fmt.Sprintf("release_age %q { minimum = %q } (%s)", pt.text, text, place(b.DefRange))
				p.windows = append(p.windows, window{pattern: pt, minimum: d, text: text, rng: b.DefRange})
				p.windowIdx[kindSlot(pt.n)].add(&pt, len(p.windows)-1)
			}
		default:
			schema, rules, exact := denyVersionSchema, &p.denyVer, true
			if b.Type == "release_age_exempt_version" {
				schema, rules, exact = exemptVersionSchema, &p.exemptVer, false
			}
			c, ds := b.Body.Content(schema)
			diags = append(diags, ds...)
			r := versionRule{block: b.Type, pattern: pt, rng: b.DefRange}
			if attr, ok := c.Attributes["reason"]; ok {
				var d hcl.Diagnostics
				r.reason, d = decodeString(attr)
				if !d.HasErrors() {
					d = reasonDiags(r.reason, attr.Expr.Range())
				}
				diags = append(diags, d...)
			}
			vkey := ""
			if attr, ok := c.Attributes["versions"]; ok {
				var d hcl.Diagnostics
				r.versions, r.set, vkey, d = decodeVersions(attr, exact, pt.n == 4)
				diags = append(diags, d...)
			}
			if b.Type == "deny_version" && strings.TrimSpace(r.reason) == "" && c.Attributes["reason"] != nil {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Empty reason", Detail: "a deny_version block's reason is shown to the people it refuses: say why, and what to use instead", Subject: c.Attributes["reason"].Expr.Range().Ptr()})
			}
			if vkey != "" {
				k := blockKey{typ: b.Type, pattern: pt.key, versions: vkey}
				if first, ok := blocks[k]; ok {
					what := fmt.Sprintf("%q { versions = %q }", pt.text, r.versions)
					diags = append(diags, duplicate(b.Type+" block", what, fmt.Sprintf("%q { versions = %q }", first.text, first.versions), first.rng, first.reason != r.reason, b.DefRange))
					continue
				}
				blocks[k] = written{text: pt.text, versions: r.versions, reason: r.reason, rng: b.DefRange}
			}
			r.pattern.detail = fmt.Sprintf("%s %q { versions = %q } (%s)", r.block, r.pattern.text, r.versions, place(r.rng))
			rules.add(r)
		}
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return p, diags
}

// duplicate is the error of a rule (what, a pattern list's entry or a
// block) at rng that names what one written before it names (first, at
// firstRng): it would change nothing, or, when it says another thing
// (differs: another reason, another minimum), never be used, since the
// first written decides. Either way the operator meant something else.
func duplicate(rule, what, first string, firstRng hcl.Range, differs bool, rng hcl.Range) *hcl.Diagnostic {
	summary, why := "Duplicate "+rule, "this one changes nothing: remove it"
	if differs {
		summary = "Contradictory " + rule
		why = "it says another thing, which would never be used, as the first written decides: keep the one you mean"
	}
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary,
		Detail:  fmt.Sprintf("%s names what %s (%s) names already; %s", what, first, place(firstRng), why),
		Subject: rng.Ptr()}
}

// decodePatterns reads a list of patterns, each error at its element.
// With reasons (deny), an element may also be an object
// { pattern = PATTERN, reason = REASON }: the pattern with what the
// people it refuses read.
func decodePatterns(attr *hcl.Attribute, reasons bool) ([]pattern, hcl.Diagnostics) {
	exprs, diags := hcl.ExprList(attr.Expr)
	if diags.HasErrors() {
		return nil, diags
	}
	var out []pattern
	for _, e := range exprs {
		v, ds := hclfile.Value(e)
		diags = append(diags, ds...)
		if ds.HasErrors() {
			continue
		}
		reason := ""
		if reasons && !v.IsNull() && v.IsWhollyKnown() && (v.Type().IsObjectType() || v.Type().IsMapType()) {
			var d *hcl.Diagnostic
			if v, reason, d = patternWithReason(v, attr.Name, e.Range()); d != nil {
				diags = append(diags, d)
				continue
			}
		}
		if v.IsNull() || !v.Type().Equals(cty.String) {
			detail := "a pattern is a string, such as \"registry.terraform.io/hashicorp/*\""
			if reasons {
				detail += ", or { pattern = PATTERN, reason = REASON }"
			}
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid " + attr.Name + " pattern", Detail: detail, Subject: e.Range().Ptr()})
			continue
		}
		p, err := compilePattern(v.AsString())
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid " + attr.Name + " pattern", Detail: err.Error(), Subject: e.Range().Ptr()})
			continue
		}
		p.rng = e.Range()
		p.reason = reason
		out = append(out, p)
	}
	return out, diags
}

// patternWithReason reads { pattern = PATTERN, reason = REASON }: the
// pattern's value, and the reason, which must say something.
func patternWithReason(v cty.Value, name string, rng hcl.Range) (cty.Value, string, *hcl.Diagnostic) {
	bad := func(detail string) (cty.Value, string, *hcl.Diagnostic) {
		return cty.NilVal, "", &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid " + name + " pattern", Detail: detail, Subject: rng.Ptr()}
	}
	attrs := v.AsValueMap()
	for k := range attrs {
		if k != "pattern" && k != "reason" {
			return bad(fmt.Sprintf("unknown key %q: an entry with a reason is { pattern = PATTERN, reason = REASON }", k))
		}
	}
	pat, reason := attrs["pattern"], attrs["reason"]
	if pat == cty.NilVal || pat.IsNull() || !pat.Type().Equals(cty.String) {
		return bad("an entry with a reason names its pattern: { pattern = PATTERN, reason = REASON }")
	}
	if reason == cty.NilVal || reason.IsNull() || !reason.Type().Equals(cty.String) || strings.TrimSpace(reason.AsString()) == "" {
		return bad("a deny entry's reason is shown to the people it refuses: say why, and what to use instead")
	}
	if d := reasonDiags(reason.AsString(), rng); d != nil {
		return cty.NilVal, "", d[0]
	}
	return pat, reason.AsString(), nil
}

// maxReasonBytes bounds a reason: a sentence or two, which every refusal
// carries and the provider registry protocol's warnings repeat for each
// version held.
const maxReasonBytes = 1024

// reasonDiags checks a reason, which the clients print on their
// terminals (a 451's body, the registry's warnings), the log records and
// config check, reload and policy explain print a line each of: valid
// UTF-8 of at most maxReasonBytes, on one line, without control or
// format characters (a terminal's escapes, reordering marks).
func reasonDiags(reason string, rng hcl.Range) hcl.Diagnostics {
	detail := ""
	switch {
	case len(reason) > maxReasonBytes:
		detail = fmt.Sprintf("a reason is at most %d bytes (this one has %d): say why, and what to use instead, in a sentence", maxReasonBytes, len(reason))
	case !utf8.ValidString(reason) || strings.ContainsFunc(reason, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }):
		detail = "a reason is one line of text, without control or format characters: the clients print it on a terminal, which would obey them"
	default:
		return nil
	}
	return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid reason", Detail: detail, Subject: rng.Ptr()}}
}

func decodeString(attr *hcl.Attribute) (string, hcl.Diagnostics) {
	v, diags := hclfile.Value(attr.Expr)
	if diags.HasErrors() {
		return "", diags
	}
	if v.IsNull() || !v.Type().Equals(cty.String) {
		return "", hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid " + attr.Name, Detail: attr.Name + " is a string", Subject: attr.Expr.Range().Ptr()}}
	}
	return v.AsString(), nil
}

// decodeVersions reads a versions attribute: one Terraform version
// constraint ("commas mean and": ">= 5.80.0, < 5.81.1"), or a list of
// them, any of which holds a version.
//
// A module's (module is set for a module pattern) may spell its versions
// with the leading "v" of its registry (addrs.ParseModuleConstraint).
func decodeVersions(attr *hcl.Attribute, exact, module bool) (string, versions.Set, string, hcl.Diagnostics) {
	v, diags := hclfile.Value(attr.Expr)
	if diags.HasErrors() {
		return "", versions.None, "", diags
	}
	bad := hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid versions", Detail: "versions is a version constraint such as \">= 5.80.0, < 5.81.1\", or a list of them", Subject: attr.Expr.Range().Ptr()}}
	if v.IsNull() || !v.IsWhollyKnown() {
		return "", versions.None, "", bad
	}
	var texts []string
	switch {
	case v.Type().Equals(cty.String):
		texts = []string{v.AsString()}
	case v.Type().IsTupleType() || v.Type().IsListType():
		for _, e := range v.AsValueSlice() {
			if e.IsNull() || !e.Type().Equals(cty.String) {
				return "", versions.None, "", bad
			}
			texts = append(texts, e.AsString())
		}
		if len(texts) == 0 {
			return "", versions.None, "", bad
		}
	default:
		return "", versions.None, "", bad
	}
	var sets []versions.Set
	var keys []string
	for _, text := range texts {
		set, k, err := parseVersions(text, exact, module)
		if err != nil {
			return "", versions.None, "", hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid version constraint", Detail: err.Error(), Subject: attr.Expr.Range().Ptr()}}
		}
		sets = append(sets, set)
		keys = append(keys, k)
	}
	shown := texts[0]
	if len(texts) > 1 {
		shown = strings.Join(texts, " or ")
	}
	slices.Sort(keys)
	return shown, versions.Union(sets...), strings.Join(slices.Compact(keys), " or "), nil
}

// decodeAge reads a minimum release age: a Go duration or whole days.
func decodeAge(attr *hcl.Attribute) (time.Duration, string, hcl.Diagnostics) {
	s, diags := decodeString(attr)
	if diags.HasErrors() {
		return 0, "", diags
	}
	d, err := parseAge(s)
	if err != nil {
		return 0, "", hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid " + attr.Name, Detail: err.Error(), Subject: attr.Expr.Range().Ptr()}}
	}
	return d, s, nil
}

func parseAge(s string) (time.Duration, error) {
	d, err := duration.Parse(s)
	if err != nil {
		return 0, fmt.Errorf("age %q: %w", s, err)
	}
	if d < 0 || d > maxAge {
		return 0, fmt.Errorf("age %q: want between 0 and %dd", s, maxAge/(24*time.Hour))
	}
	return d, nil
}

// parseVersions parses a Terraform version constraint. exact keeps the
// prereleases within its bounds and disregards build metadata (what a
// deny means: "= 1.1.0" and "= 1.1.0+build" both name release 1.1.0,
// every build of it, and Subject.Version asks about a version without
// its metadata); otherwise a prerelease is held only when named exactly,
// as Terraform selects, and metadata counts. The key is the constraint
// as parsed, the same for two spellings of it ("= v1.1.0" and "1.1.0" of
// a module, ">= 1, < 2" and "< 2, >= 1").
func parseVersions(s string, exact, module bool) (versions.Set, string, error) {
	parse := addrs.ParseConstraint
	if module {
		parse = addrs.ParseModuleConstraint
	}
	spec, err := parse(s)
	if err != nil {
		return versions.None, "", err
	}
	if holdsNone(spec) {
		return versions.None, "", fmt.Errorf("version constraint %q holds no version: its parts, separated by commas, must all hold (commas mean and); for any one of several, write a list: versions = [\"...\", \"...\"]", s)
	}
	if exact {
		for i := range spec {
			spec[i].Boundary.Metadata = ""
		}
	}
	parts := make([]string, len(spec))
	for i, sel := range spec {
		parts[i] = fmt.Sprintf("%c %#v", sel.Operator, sel.Boundary)
	}
	slices.Sort(parts)
	key := strings.Join(slices.Compact(parts), ", ")
	if exact {
		return versions.MeetingConstraintsExact(spec), key, nil
	}
	return versions.MeetingConstraints(spec), key, nil
}

// holdsNone reports whether spec holds no version at all, prerelease or
// not, as far as its bounds show: its greatest lower bound is above its
// least upper bound (">= 5.81.1, < 5.80.0", "= 1.0.0, = 1.0.1", what an
// operator who took the commas for "or" writes). Bounds it cannot read
// ("!=", a wildcard) count for nothing: a constraint it passes may still
// hold nothing, one it refuses holds nothing.
func holdsNone(spec constraints.IntersectionSpec) bool {
	type bound struct {
		v    versions.Version
		incl bool
		set  bool
	}
	var lo, hi bound
	raise := func(v versions.Version, incl bool) {
		if !lo.set || v.GreaterThan(lo.v) || v.Same(lo.v) && lo.incl && !incl {
			lo = bound{v, incl, true}
		}
	}
	lower := func(v versions.Version, incl bool) {
		if !hi.set || v.LessThan(hi.v) || v.Same(hi.v) && hi.incl && !incl {
			hi = bound{v, incl, true}
		}
	}
	for _, sel := range spec {
		b := sel.Boundary.ConstrainToZero()
		v := versions.Version{Major: b.Major.Num, Minor: b.Minor.Num, Patch: b.Patch.Num, Prerelease: versions.VersionExtra(b.Prerelease)}
		switch sel.Operator {
		case constraints.OpEqual:
			raise(v, true)
			lower(v, true)
		case constraints.OpGreaterThan:
			raise(v, false)
		case constraints.OpGreaterThanOrEqual:
			raise(v, true)
		case constraints.OpLessThan:
			lower(v, false)
		case constraints.OpLessThanOrEqual:
			lower(v, true)
		case constraints.OpGreaterThanOrEqualMinorOnly, constraints.OpGreaterThanOrEqualPatchOnly:
			raise(v, true)
			u := versions.Version{Major: v.Major + 1}
			if sel.Operator == constraints.OpGreaterThanOrEqualPatchOnly {
				u = versions.Version{Major: v.Major, Minor: v.Minor + 1}
			}
			lower(u, false)
		}
	}
	if !lo.set || !hi.set {
		return false
	}
	return lo.v.GreaterThan(hi.v) || lo.v.Same(hi.v) && !(lo.incl && hi.incl)
}
