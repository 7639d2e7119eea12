package oci

import (
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/apparentlymart/go-versions/versions"
	svchost "github.com/hashicorp/terraform-svchost"
	"golang.org/x/net/idna"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

// The repository names, one mapping for everything OCI names do not
// allow. An OCI repository name is a series of path components, each of
// lowercase letters and digits with single separators ('.', '_', '__' or
// dashes) between them (distribution-spec). Addresses map part for part:
//
//	providers:  PREFIX/HOST/NAMESPACE/TYPE
//	modules:    MODULE-PREFIX/HOST/NAMESPACE/NAME/SYSTEM
//
// and every part that is already a valid component is written as it is:
// a provider's parts are so in their normal form (lowercase, punycode
// hosts), except a host with a port and a namespace or type with letters
// outside ASCII, and so are module parts of lowercase letters, digits
// and single separators. The two exceptions:
//
//   - a host with a port, HOST:PORT, is written HOST__PORT (a host never
//     holds an underscore, so the form is unambiguous);
//   - a namespace, type, name or system that is not a valid component, or
//     holds a dot (upper case, "a_-b", a non-ASCII letter), is written as
//     its readable form (lowercase ASCII letters and digits, each other run
//     of bytes as one dash), ".x" and the part's bytes in hex: "Acme_Corp"
//     is "acme-corp.x41636d655f436f7270". No part written as it is holds a
//     dot, so no such form collides with one.
//
// OpenTofu puts the hostname, namespace and type into its
// repository_template as they are, so a provider whose host has a port is
// reached with its own oci_mirror block naming HOST__PORT in the template
// and the provider in include.
var componentPattern = regexp.MustCompile(`^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*$`)

// maxNameLen bounds a repository name read from a request: the
// distribution-spec's advice on names (255 bytes with the registry's
// host) with room for the longest address.
const maxNameLen = 1024

// MaxRegistryNameLen is the longest repository name the registries take
// (distribution's, and the clients that check names as it does, refuse a
// longer one): 255 bytes, the registry's host left out. The mirror's own
// front door serves longer names (maxNameLen), as a long origin host or a
// hex-encoded part (wordComponent) makes them; no registry can hold such
// a repository under the same name.
const MaxRegistryNameLen = 255

// ErrNotMirrored is returned by Names.Parse for a repository name that no
// address maps to: outside both prefixes, or malformed below them.
var ErrNotMirrored = errors.New("not a repository of this mirror")

// Names maps provider and module addresses to repository names under two
// prefixes, and back.
type Names struct {
	providers, modules string
}

// NewNames checks the two prefixes (each a valid repository name of one
// or more components, the two different and neither a path prefix of the
// other, so that every name parses one way) and returns their Names.
func NewNames(providerPrefix, modulePrefix string) (Names, error) {
	for _, p := range []struct{ what, s string }{{"provider", providerPrefix}, {"module", modulePrefix}} {
		if err := checkPath(p.s); err != nil {
			return Names{}, fmt.Errorf("OCI %s repository prefix %q: %w", p.what, p.s, err)
		}
	}
	if providerPrefix == modulePrefix || strings.HasPrefix(providerPrefix+"/", modulePrefix+"/") || strings.HasPrefix(modulePrefix+"/", providerPrefix+"/") {
		return Names{}, fmt.Errorf("OCI repository prefixes %q (providers) and %q (modules): neither may be the other or lie under it", providerPrefix, modulePrefix)
	}
	return Names{providers: providerPrefix, modules: modulePrefix}, nil
}

// ValidRepository reports whether s is a repository name as the
// distribution spec writes them: components of lowercase letters and
// digits with single '.', '_', '__' or '-' separators, separated by
// single slashes (so nothing a shell or a URL reads otherwise).
func ValidRepository(s string) bool { return checkPath(s) == nil }

// checkPath checks a repository name (or a prefix of one): components
// separated by single slashes.
func checkPath(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	if len(s) > maxNameLen {
		return fmt.Errorf("longer than %d bytes", maxNameLen)
	}
	for c := range strings.SplitSeq(s, "/") {
		if !componentPattern.MatchString(c) {
			return fmt.Errorf("component %q: want lowercase letters and digits with single '.', '_', '__' or '-' separators", c)
		}
	}
	return nil
}

// ProviderPrefix is the prefix of provider repositories.
func (n Names) ProviderPrefix() string { return n.providers }

// ModulePrefix is the prefix of module repositories.
func (n Names) ModulePrefix() string { return n.modules }

// Provider returns a provider's repository name, PREFIX/HOST/NAMESPACE/TYPE.
func (n Names) Provider(p addrs.Provider) string {
	return n.providers + "/" + HostComponent(p.Hostname) + "/" + wordComponent(p.Namespace) + "/" + wordComponent(p.Type)
}

// Module returns a module's repository name,
// PREFIX/HOST/NAMESPACE/NAME/SYSTEM, its namespace and name as the
// address was given (addrs.Module.OriginPath: a name in capitals keeps
// them, hex-encoded, so that the origin is asked for the module as
// spelled). Every spelling's repository is the one module: Parse gives
// its address, which is keyed and judged in its normal form.
func (n Names) Module(m addrs.Module) string {
	p := m.OriginPath()
	return n.modules + "/" + HostComponent(m.Hostname) + "/" + wordComponent(p[0]) + "/" + wordComponent(p[1]) + "/" + wordComponent(p[2])
}

// Kind says what a repository holds.
type Kind int

// The kinds of repository.
const (
	KindProvider Kind = iota + 1
	KindModule
)

// Repository is a parsed repository name: a provider's (Kind
// KindProvider, Provider set) or a module's (KindModule, Module set).
type Repository struct {
	Kind     Kind
	Provider addrs.Provider
	Module   addrs.Module
}

// Parse reads a repository name as Provider and Module write it, and
// accepts only the one name each address has (the inverse of the
// mapping, checked by writing the address back). A name that is not one
// wraps ErrNotMirrored.
func (n Names) Parse(name string) (Repository, error) {
	if err := checkPath(name); err != nil {
		return Repository{}, fmt.Errorf("repository name %.80q: %w: %v", name, ErrNotMirrored, err)
	}
	var r Repository
	var err error
	switch {
	case strings.HasPrefix(name, n.providers+"/"):
		r, err = parseProvider(strings.Split(strings.TrimPrefix(name, n.providers+"/"), "/"))
	case strings.HasPrefix(name, n.modules+"/"):
		r, err = parseModule(strings.Split(strings.TrimPrefix(name, n.modules+"/"), "/"))
	default:
		err = errors.New("outside the provider and module prefixes")
	}
	if err == nil {
		want := ""
		switch r.Kind {
		case KindProvider:
			want = n.Provider(r.Provider)
		case KindModule:
			want = n.Module(r.Module)
		}
		if want != name {
			err = fmt.Errorf("not the address's normal form (that is %q)", want)
		}
	}
	if err != nil {
		return Repository{}, fmt.Errorf("repository name %.80q: %w: %v", name, ErrNotMirrored, err)
	}
	return r, nil
}

func parseProvider(parts []string) (Repository, error) {
	if len(parts) != 3 {
		return Repository{}, errors.New("want PREFIX/HOST/NAMESPACE/TYPE")
	}
	host, err := parseHostComponent(parts[0])
	if err != nil {
		return Repository{}, err
	}
	ns, err := parseWordComponent(parts[1])
	if err != nil {
		return Repository{}, err
	}
	typ, err := parseWordComponent(parts[2])
	if err != nil {
		return Repository{}, err
	}
	p, err := addrs.NewProvider(host, ns, typ)
	if err != nil {
		return Repository{}, err
	}
	return Repository{Kind: KindProvider, Provider: p}, nil
}

func parseModule(parts []string) (Repository, error) {
	if len(parts) != 4 {
		return Repository{}, errors.New("want PREFIX/HOST/NAMESPACE/NAME/SYSTEM")
	}
	host, err := parseHostComponent(parts[0])
	if err != nil {
		return Repository{}, err
	}
	words := make([]string, 3)
	for i := range words {
		if words[i], err = parseWordComponent(parts[i+1]); err != nil {
			return Repository{}, err
		}
	}
	m, err := addrs.NewModule(host, words[0], words[1], words[2])
	if err != nil {
		return Repository{}, err
	}
	return Repository{Kind: KindModule, Module: m}, nil
}

// HostComponent is the component repository names write host h as: its
// comparison form (svchost's, punycode for IDN labels) as it is, with a
// port's colon as "__" ("example.com__8443"). What names a repository of
// a host to a person (the status page's example of a module source)
// writes the host with it.
func HostComponent(h svchost.Hostname) string {
	return strings.Replace(string(h), ":", "__", 1)
}

// parseHostComponent reads what HostComponent writes, and accepts only
// the comparison form of a host.
func parseHostComponent(s string) (svchost.Hostname, error) {
	host, port, hasPort := strings.Cut(s, "__")
	if strings.ContainsAny(host, "_") || strings.ContainsAny(port, "_.-") {
		return "", fmt.Errorf("host %q: want HOST or HOST__PORT", s)
	}
	candidate, display := host, ""
	// Punycode is refused as a user's input by svchost: read the
	// display form, and accept only a host that normalises back to
	// exactly what was given.
	display, err := idna.Lookup.ToUnicode(host)
	if err != nil {
		return "", fmt.Errorf("host %q: %v", s, err)
	}
	if hasPort {
		candidate += ":" + port
		display += ":" + port
	}
	h, err := svchost.ForComparison(display)
	if err != nil {
		return "", fmt.Errorf("host %q: %v", s, err)
	}
	if string(h) != candidate {
		return "", fmt.Errorf("host %q: not in normal form (that is %q)", s, HostComponent(h))
	}
	return h, nil
}

// wordComponent writes a namespace, type, name or system: as it is when
// that is a valid component without a dot, else readable form, ".x" and
// hex.
func wordComponent(s string) string {
	if !strings.Contains(s, ".") && componentPattern.MatchString(s) {
		return s
	}
	var b strings.Builder
	dash := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteByte(c)
			continue
		}
		dash = true
	}
	if b.Len() == 0 {
		b.WriteByte('x')
	}
	return b.String() + ".x" + hex.EncodeToString([]byte(s))
}

// parseWordComponent reads what wordComponent writes, and accepts only
// what it writes.
func parseWordComponent(s string) (string, error) {
	word := s
	if i := strings.LastIndex(s, ".x"); i >= 0 {
		b, err := hex.DecodeString(s[i+2:])
		if err != nil || len(b) == 0 {
			return "", fmt.Errorf("part %q: the part after \".x\" is not hex", s)
		}
		word = string(b)
	}
	if wordComponent(word) != s {
		return "", fmt.Errorf("part %q: not in normal form (that is %q)", s, wordComponent(word))
	}
	return word, nil
}

// tagPattern is the distribution-spec's tag grammar.
var tagPattern = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$`)

// Tag returns the tag of a version as OpenTofu asks for it: the version
// with '+' written as '_'. ok is false for a string that is not a
// version in its normal form (the form addrs.ParseSemver writes back),
// or whose tag would be longer than a tag may be.
func Tag(version string) (tag string, ok bool) {
	if v, err := addrs.ParseSemver(version); err != nil || v.String() != version {
		return "", false
	}
	tag = strings.ReplaceAll(version, "+", "_")
	if !tagPattern.MatchString(tag) {
		return "", false
	}
	return tag, true
}

// ParseTag is Tag's inverse: the version a tag names. A tag that names no
// version (not one Tag writes) gives ok false: OpenTofu ignores such tags,
// and the front door serves none.
func ParseTag(tag string) (version string, ok bool) {
	if !tagPattern.MatchString(tag) {
		return "", false
	}
	version = strings.ReplaceAll(tag, "_", "+")
	if t, ok := Tag(version); !ok || t != tag {
		return "", false
	}
	return version, true
}

// ParseModuleTag is ParseTag of a module repository's tag, where a
// version is a module version (addrs.ParseModuleVersion): the tag of a
// version, or that tag with the leading "v" the module registry protocol
// allows ("v1.1.0" names 1.1.0, as the registry door reads it). A tag
// that names no version gives ok false.
func ParseModuleTag(tag string) (v versions.Version, ok bool) {
	if !tagPattern.MatchString(tag) {
		return versions.Version{}, false
	}
	v, err := addrs.ParseModuleVersion(strings.ReplaceAll(tag, "_", "+"))
	if err != nil {
		return versions.Version{}, false
	}
	if t, ok := Tag(v.String()); !ok || (tag != t && tag != "v"+t) {
		return versions.Version{}, false
	}
	return v, true
}
