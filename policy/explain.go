package policy

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

// ParseAddress reads an address as a person types it and says what it
// names: HOST/NAMESPACE/NAME/SYSTEM is a module; NAMESPACE/TYPE is a
// provider of registry.terraform.io; of three parts, one whose first
// part is a host name (it has a dot or a port, or is localhost) is a
// provider (HOST/NAMESPACE/TYPE), else a module of registry.terraform.io
// (NAMESPACE/NAME/SYSTEM). The address is returned in its normal form.
func ParseAddress(s string) (Kind, string, error) {
	parts := strings.Split(s, "/")
	if len(parts) == 2 || len(parts) == 3 && hostName(parts[0]) {
		return ParseAddressAs(Provider, s)
	}
	kind, addr, err := ParseAddressAs(Module, s)
	if err != nil {
		return "", "", fmt.Errorf("%q is neither a provider address ([HOST/]NAMESPACE/TYPE) nor a module address ([HOST/]NAMESPACE/NAME/SYSTEM): %v", s, err)
	}
	return kind, addr, nil
}

// hostName says whether the first part of a three-part address names a
// host (it has a dot or a port, or is localhost), which makes the address
// a provider's for ParseAddress.
func hostName(part string) bool {
	return strings.ContainsAny(part, ".:") || strings.EqualFold(part, "localhost")
}

// ParseAddressAs reads s as an address of kind: a provider
// ([HOST/]NAMESPACE/TYPE) or a module ([HOST/]NAMESPACE/NAME/SYSTEM),
// whatever its first part looks like, so that a provider of a host whose
// name has no dot (HOST/NAMESPACE/TYPE, which ParseAddress reads as a
// module) can be named. An empty kind reads s as ParseAddress does.
func ParseAddressAs(kind Kind, s string) (Kind, string, error) {
	switch kind {
	case "":
		return ParseAddress(s)
	case Provider:
		p, err := addrs.ParseProvider(s)
		if err != nil {
			return "", "", err
		}
		return Provider, p.String(), nil
	case Module:
		m, err := addrs.ParseModule(s)
		if err != nil {
			return "", "", err
		}
		return Module, m.String(), nil
	}
	return "", "", fmt.Errorf("kind %q: want %s or %s", kind, Provider, Module)
}

// ReadAsModule says whether ParseAddress reads s, of three parts, as a
// module of registry.terraform.io where it could be read as a provider of
// the host its first part names.
func ReadAsModule(s string) bool {
	parts := strings.Split(s, "/")
	return len(parts) == 3 && !hostName(parts[0])
}

// Explanation is what `tfmirror policy explain` prints of one address or
// version: the verdict, the rule that decided it and why.
type Explanation struct {
	Kind    Kind
	Address string
	Version string // empty: the address, whatever the version
	Verdict Verdict
	// Window is the minimum release age that applies to the address, and
	// WindowText the same as the policy writes it ("72h").
	Window     time.Duration
	WindowText string
	// Release is what is known of the version's release, and ReleaseFrom
	// where that came from ("the cache", ...), for the reader.
	Release     Release
	ReleaseFrom string
}

// Explain judges version of address (the address alone when version is
// empty) at now, with what is known of its release.
func (p *Policy) Explain(kind Kind, address, version string, rel Release, from string, now time.Time) Explanation {
	e := Explanation{Kind: kind, Address: address, Version: version, Release: rel, ReleaseFrom: from}
	s := p.For(kind, address)
	if version == "" {
		e.Verdict = s.Address()
	} else {
		e.Verdict = s.Version(version, rel, now)
	}
	e.Window, e.WindowText = s.Window(), s.wtext
	return e
}

// String is the explanation as lines for people.
func (e Explanation) String() string {
	var b strings.Builder
	what := string(e.Kind) + " " + e.Address
	if e.Version != "" {
		what += " " + e.Version
	}
	v := e.Verdict
	switch {
	case v.Allowed:
		fmt.Fprintf(&b, "%s: allowed\n", what)
	case v.Rule == RuleMinReleaseAge && !v.AvailableAt.IsZero():
		fmt.Fprintf(&b, "%s: held back (%s) until %s\n", what, v.Rule, v.AvailableAt.UTC().Format(time.RFC3339))
	case v.Rule == RuleMinReleaseAge:
		fmt.Fprintf(&b, "%s: held back (%s) until its release time is known\n", what, v.Rule)
	default:
		fmt.Fprintf(&b, "%s: refused (%s)\n", what, v.Rule)
	}
	rule := v.Detail
	if rule == "" {
		rule = "none applies: allowed by default"
	}
	fmt.Fprintf(&b, "  decided by: %s\n", rule)
	if v.Reason != "" {
		fmt.Fprintf(&b, "  reason:     %s\n", v.Reason)
	}
	if e.Window > 0 {
		fmt.Fprintf(&b, "  minimum release age: %s\n", cmp.Or(e.WindowText, e.Window.String()))
	}
	if e.Version != "" && e.Window > 0 {
		switch {
		case e.Release.InHouse:
			fmt.Fprintf(&b, "  released:   in-house build (%s)\n", e.ReleaseFrom)
		case e.Release.Known && e.Release.At.IsZero():
			// The first listing's versions (the bootstrap).
			fmt.Fprintf(&b, "  released:   before the mirror first listed it (%s)\n", e.ReleaseFrom)
		case e.Release.Known:
			fmt.Fprintf(&b, "  released:   %s (%s)\n", e.Release.At.UTC().Format(time.RFC3339), e.ReleaseFrom)
		default:
			fmt.Fprintf(&b, "  released:   not known (%s)\n", e.ReleaseFrom)
		}
	}
	return b.String()
}
