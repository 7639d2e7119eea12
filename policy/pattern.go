package policy

import (
	"errors"
	"fmt"
	"strings"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/hashicorp/hcl/v2"
	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

// Kind is what an address names: a provider or a module.
type Kind string

// The kinds of address.
const (
	Provider Kind = "provider"
	Module   Kind = "module"
)

// segments is the number of parts of an address of kind k: 3 for a
// provider (HOST/NAMESPACE/TYPE), 4 for a module
// (HOST/NAMESPACE/NAME/SYSTEM), 0 for an unknown kind.
func (k Kind) segments() int {
	switch k {
	case Provider:
		return 3
	case Module:
		return 4
	}
	return 0
}

// ParseVersion parses a version of a package of kind k as its registry
// spells it: a module's with the leading "v" module registries may list
// (addrs.ParseModuleVersion: "v1.1.0" is 1.1.0), any other's as
// addrs.ParseSemver.
func (k Kind) ParseVersion(s string) (versions.Version, error) {
	if k == Module {
		return addrs.ParseModuleVersion(s)
	}
	return addrs.ParseSemver(s)
}

// key is an address in its compared form: host in svchost's comparison
// form, every other part in lowercase (providers' parts are lowercase in
// their normal form; module namespaces and names are compared without
// case, as the registries treat them).
type key struct {
	n   int
	seg [4]string
}

func (k key) String() string { return strings.Join(k.seg[:k.n], "/") }

// pattern is one address pattern as compiled: a part "*" matches any
// one part; any other part matches that part only.
type pattern struct {
	key
	text   string    // as the operator wrote it
	rng    hcl.Range // where
	detail string    // the rule it belongs to, as written, with file:line
	reason string    // a deny pattern's reason, as the operator wrote it ("": none)
}

func (p *pattern) matches(a key) bool {
	if p.n != a.n {
		return false
	}
	for i := range p.n {
		if s := p.seg[i]; s != "*" && s != a.seg[i] {
			return false
		}
	}
	return true
}

// wildcards is how many parts of p are "*": fewer is more specific.
func (p *pattern) wildcards() int {
	n := 0
	for _, s := range p.seg[:p.n] {
		if s == "*" {
			n++
		}
	}
	return n
}

// compilePattern reads a pattern: a provider pattern has three parts, a
// module pattern four; the host is always written (it is what tells a
// provider pattern from a module one). Each part is "*" or a part as the
// address parsers accept it, normalised as they do.
func compilePattern(s string) (pattern, error) {
	parts := strings.Split(s, "/")
	var kind Kind
	switch len(parts) {
	case 3:
		kind = Provider
	case 4:
		kind = Module
	default:
		return pattern{}, fmt.Errorf("pattern %q: want HOST/NAMESPACE/TYPE (a provider) or HOST/NAMESPACE/NAME/SYSTEM (a module), each part a name or *", s)
	}
	p := pattern{key: key{n: len(parts)}, text: s}
	switch host := parts[0]; {
	case host == "*":
		p.seg[0] = "*"
	case strings.Contains(host, "*"):
		return pattern{}, fmt.Errorf("pattern %q: %q: a * stands for a whole part, not part of one", s, host)
	default:
		// As the addresses are read (addrs.ParseHost): a host in Unicode
		// or in the punycode the mirror writes it in (its log, its status
		// page). A trailing dot is refused as the front doors refuse it:
		// no address they take has one, so the rule would match nothing.
		h, err := addrs.ParseHost(host)
		if err == nil && addrs.TrailingDot(host) {
			err = errors.New("trailing dot: the clients name a host without one")
		}
		if err != nil {
			return pattern{}, fmt.Errorf("pattern %q: invalid host %q: %v", s, host, err)
		}
		p.seg[0] = string(h)
	}
	for i := 1; i < len(parts); i++ {
		part := parts[i]
		if part == "*" {
			p.seg[i] = "*"
			continue
		}
		if strings.Contains(part, "*") {
			return pattern{}, fmt.Errorf("pattern %q: %q: a * stands for a whole part, not part of one", s, part)
		}
		if kind == Provider {
			// Check through the provider parser with "x" in the other
			// place, so that each part gets its own message.
			ns, typ := "x", "x"
			if i == 1 {
				ns = part
			} else {
				typ = part
			}
			pr, err := addrs.NewProvider(svchost.Hostname("x"), ns, typ)
			if err != nil {
				return pattern{}, fmt.Errorf("pattern %q: %v", s, err)
			}
			if i == 1 {
				p.seg[i] = pr.Namespace
			} else {
				p.seg[i] = pr.Type
			}
			continue
		}
		what := [...]string{"", "namespace", "name", "system"}[i]
		if err := addrs.CheckModulePart(what, part); err != nil {
			return pattern{}, fmt.Errorf("pattern %q: %v", s, err)
		}
		p.seg[i] = strings.ToLower(part)
	}
	return p, nil
}

// maxAddressLen bounds an address: a host (253) and a port, and three
// parts of at most 64 bytes, as addrs bounds them.
const maxAddressLen = 253 + len(":65535") + 3*(1+64)

// addressKey reads an address of kind k into its compared form. An
// address already in its normal form (as addrs prints it: lowercase
// ASCII host without a port) is split without allocating; any other is
// parsed by addrs.
func addressKey(k Kind, s string) (key, error) {
	n := k.segments()
	if n == 0 {
		return key{}, fmt.Errorf("unknown kind %q", k)
	}
	if len(s) > maxAddressLen {
		return key{}, fmt.Errorf("%s address %.40q...: too long", k, s)
	}
	var a key
	a.n = n
	rest := s
	i := 0
	simple := true
	for i < n {
		j := strings.IndexByte(rest, '/')
		part := rest
		if j >= 0 {
			part, rest = rest[:j], rest[j+1:]
		} else {
			rest = ""
		}
		if part == "" || (j < 0) != (i == n-1) {
			simple = false
			break
		}
		if !plainPart(part, i == 0) {
			simple = false
			break
		}
		a.seg[i] = part
		i++
	}
	if simple {
		return a, nil
	}
	// The parsers read a host in the normal form too (punycode for an
	// IDN host, which with a port is not simple): addrs.ParseHost.
	switch k {
	case Provider:
		p, err := addrs.ParseProvider(s)
		if err != nil || strings.Count(s, "/") != 2 {
			return key{}, fmt.Errorf("not a provider address HOST/NAMESPACE/TYPE: %q", s)
		}
		a.seg[0], a.seg[1], a.seg[2] = string(p.Hostname), p.Namespace, p.Type
	default:
		m, err := addrs.ParseModule(s)
		if err != nil || strings.Count(s, "/") != 3 {
			return key{}, fmt.Errorf("not a module address HOST/NAMESPACE/NAME/SYSTEM: %q", s)
		}
		a.seg[0], a.seg[1], a.seg[2], a.seg[3] = string(m.Hostname), strings.ToLower(m.Namespace), strings.ToLower(m.Name), m.System
	}
	return a, nil
}

// plainPart reports whether s, a part of an address (host: its first), is
// already in its compared form: lowercase ASCII letters, digits, dashes, underscores,
// and in a host dots (a host with a port, uppercase or non-ASCII goes
// through the parser). A host goes through the parser too when a label
// of it is empty (a trailing dot: the same host as without it, to DNS,
// which the front doors refuse; a leading dot, "a..b") or in punycode
// ("xn--": the parser reads it back to its normal form, or refuses one
// that is no host's), so that the quick read takes no spelling the
// parser refuses for an address of its own, which no rule names.
func plainPart(s string, host bool) bool {
	label := 0 // where the host's current label starts
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
		case c == '.' && host:
			if i == label {
				return false
			}
			label = i + 1
		case c == '_' && !host:
		default:
			return false
		}
	}
	if !host {
		return true
	}
	if label == len(s) {
		return false
	}
	return !strings.Contains(s, "xn--")
}

// index finds the patterns that match an address among many, without
// trying each: patterns with a literal host and namespace are looked up
// by both, those with a literal host and a wildcard namespace by host,
// and only patterns with a wildcard host are tried one by one.
type index struct {
	byNamespace map[[2]string][]int
	byHost      map[string][]int
	anyHost     []int
}

func (x *index) add(p *pattern, i int) {
	switch {
	case p.seg[0] == "*":
		x.anyHost = append(x.anyHost, i)
	case p.seg[1] == "*":
		if x.byHost == nil {
			x.byHost = map[string][]int{}
		}
		x.byHost[p.seg[0]] = append(x.byHost[p.seg[0]], i)
	default:
		if x.byNamespace == nil {
			x.byNamespace = map[[2]string][]int{}
		}
		k := [2]string{p.seg[0], p.seg[1]}
		x.byNamespace[k] = append(x.byNamespace[k], i)
	}
}

// candidates calls fn with the index of each entry that may match a, in
// three runs each in ascending order; fn returns false to stop.
func (x *index) candidates(a key, fn func(i int) bool) {
	for _, list := range [3][]int{x.byNamespace[[2]string{a.seg[0], a.seg[1]}], x.byHost[a.seg[0]], x.anyHost} {
		for _, i := range list {
			if !fn(i) {
				return
			}
		}
	}
}
