package proxy

import (
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/apparentlymart/go-versions/versions"
	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/discovery"
	"github.com/tfmirror/tfmirror/mirror"
)

// Limits on request path parts. Real provider addresses are far shorter;
// anything longer is refused before it reaches the cache or an origin.
const (
	maxPartLen    = 64
	maxHostLen    = 253 + len(":65535")
	maxVersionLen = 128
)

// parseProvider validates the HOST/NAMESPACE/TYPE parts of a request path,
// given in their raw (still percent-encoded) form.
func parseProvider(rawHost, rawNamespace, rawType string) (discovery.Provider, error) {
	hostPart, err := unescapePart("host", rawHost, maxHostLen)
	if err != nil {
		return discovery.Provider{}, err
	}
	host, err := parseHost(hostPart)
	if err != nil {
		return discovery.Provider{}, err
	}
	ns, err := unescapePart("namespace", rawNamespace, maxPartLen)
	if err != nil {
		return discovery.Provider{}, err
	}
	if err := checkProviderPart("namespace", ns); err != nil {
		return discovery.Provider{}, err
	}
	typ, err := unescapePart("type", rawType, maxPartLen)
	if err != nil {
		return discovery.Provider{}, err
	}
	if err := checkProviderPart("type", typ); err != nil {
		return discovery.Provider{}, err
	}
	return discovery.Provider{Hostname: host, Namespace: ns, Type: typ}, nil
}

// parseHost accepts a host exactly as Terraform and OpenTofu send it:
// svchost's comparison form (lowercase ASCII, punycode for IDN labels, no
// :443). Any other spelling of a host is refused rather than normalised,
// so that one provider has one cache key.
func parseHost(s string) (svchost.Hostname, error) {
	if s == "" {
		return "", badRequest("host is empty")
	}
	// svchost refuses punycode input, so go through the display form.
	h, err := svchost.ForComparison(svchost.ForDisplay(s))
	if err != nil {
		return "", badRequest("invalid host %q: %v", s, err)
	}
	if h.String() != s {
		return "", badRequest("host %q is not in canonical form (want %q)", s, h.String())
	}
	// svchost lets trailing dots through ("example.com.", even "a.."):
	// one host would have several cache keys, and ".." has no place in a path.
	if name, _, _ := strings.Cut(s, ":"); strings.HasSuffix(name, ".") {
		return "", badRequest("invalid host %q: trailing dot", s)
	}
	return h, nil
}

// checkProviderPart applies the rules for provider namespaces and types:
// letters, digits and dashes, no leading, trailing or doubled dash, given in
// lowercase.
func checkProviderPart(what, s string) error {
	if s == "" {
		return badRequest("%s is empty", what)
	}
	if s != strings.ToLower(s) {
		return badRequest("%s %q must be lowercase", what, s)
	}
	if strings.HasPrefix(s, "-") || strings.HasSuffix(s, "-") || strings.Contains(s, "--") {
		return badRequest("%s %q may not start or end with a dash or contain two in a row", what, s)
	}
	for _, r := range s {
		if r != '-' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			return badRequest("%s %q may contain only letters, digits and dashes", what, s)
		}
	}
	return nil
}

// parseVersion accepts a semantic version in the canonical form the
// clients request (they re-serialise "1.2" as "1.2.0").
func parseVersion(s string) (versions.Version, error) {
	if s == "" || len(s) > maxVersionLen {
		return versions.Version{}, badRequest("invalid version %q", s)
	}
	v, err := mirror.ParseSemver(s)
	if err != nil {
		return versions.Version{}, badRequest("invalid version %q: %v", s, err)
	}
	if v.String() != s {
		return versions.Version{}, badRequest("version %q is not in canonical form (want %q)", s, v.String())
	}
	return v, nil
}

// parsePlatform parses "os_arch" from a request path.
func parsePlatform(s string) (discovery.Platform, error) {
	pl, err := mirror.ParsePlatform(s)
	if err != nil {
		return discovery.Platform{}, badRequest("%v", err)
	}
	return pl, nil
}

// parseArchiveName parses an archive file name of a request path for a
// provider of type typ (mirror.ParseArchiveName), with a version in the
// canonical form the clients request.
func parseArchiveName(typ, name string) (versions.Version, discovery.Platform, error) {
	version, pl, err := mirror.ParseArchiveName(typ, name)
	if err != nil {
		return versions.Version{}, discovery.Platform{}, badRequest("%v", err)
	}
	v, err := parseVersion(version)
	if err != nil {
		return versions.Version{}, discovery.Platform{}, err
	}
	return v, pl, nil
}

// unescapePart decodes one percent-encoded path segment and refuses what
// could change the meaning of the path: encoded slashes and backslashes,
// dot segments, control characters and invalid UTF-8.
func unescapePart(what, raw string, limit int) (string, error) {
	if len(raw) > 3*limit {
		return "", badRequest("%s is too long", what)
	}
	s, err := url.PathUnescape(raw)
	if err != nil {
		return "", badRequest("%s is not a valid path segment: %v", what, err)
	}
	if len(s) > limit {
		return "", badRequest("%s is too long (at most %d bytes)", what, limit)
	}
	if s == "." || s == ".." {
		return "", badRequest("%s may not be a dot segment", what)
	}
	if !utf8.ValidString(s) {
		return "", badRequest("%s is not valid UTF-8", what)
	}
	for _, r := range s {
		if r == '/' || r == '\\' || unicode.IsControl(r) || unicode.IsSpace(r) {
			return "", badRequest("%s contains a forbidden character %q", what, r)
		}
	}
	return s, nil
}

// ParseProviderAddress parses a provider address HOST/NAMESPACE/TYPE with
// the rules of a request path's parts (host in canonical form), for the
// admin API. A malformed address is a RequestError (400).
func ParseProviderAddress(s string) (discovery.Provider, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return discovery.Provider{}, badRequest("provider %q: want HOST/NAMESPACE/TYPE", s)
	}
	return parseProvider(parts[0], parts[1], parts[2])
}
