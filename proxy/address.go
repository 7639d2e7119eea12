package proxy

import (
	"net/url"
	"unicode"
	"unicode/utf8"

	"github.com/apparentlymart/go-versions/versions"
	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
)

// Limits on request path parts. Real provider addresses are far shorter;
// anything longer is refused before it reaches the cache or an origin.
const (
	maxPartLen    = 64
	maxHostLen    = 253 + len(":65535")
	maxVersionLen = addrs.MaxVersionLen
)

// parseProvider validates the HOST/NAMESPACE/TYPE parts of a request path,
// given in their raw (still percent-encoded) form, by the clients' rules
// (addrs.NewProvider). Every part must be in the form the clients
// send: another spelling of a provider is refused rather than normalised,
// so that one provider has one cache key.
func parseProvider(rawHost, rawNamespace, rawType string) (addrs.Provider, error) {
	hostPart, err := unescapePart("host", rawHost, maxHostLen)
	if err != nil {
		return addrs.Provider{}, err
	}
	host, err := parseHost(hostPart)
	if err != nil {
		return addrs.Provider{}, err
	}
	ns, err := unescapePart("namespace", rawNamespace, maxPartLen)
	if err != nil {
		return addrs.Provider{}, err
	}
	typ, err := unescapePart("type", rawType, maxPartLen)
	if err != nil {
		return addrs.Provider{}, err
	}
	p, err := addrs.NewProvider(host, ns, typ)
	if err != nil {
		return addrs.Provider{}, httperr.BadRequest("%v", err)
	}
	for _, part := range []struct{ what, given, normal string }{{"namespace", ns, p.Namespace}, {"type", typ, p.Type}} {
		if part.given != part.normal {
			return addrs.Provider{}, httperr.BadRequest("%s %q is not in normal form: the clients send it lowercase, as %q", part.what, part.given, part.normal)
		}
	}
	return p, nil
}

// parseHost accepts a host exactly as Terraform and OpenTofu send it:
// svchost's comparison form (lowercase ASCII, punycode for IDN labels, no
// :443). Any other spelling of a host is refused rather than normalised,
// so that one provider has one cache key.
func parseHost(s string) (svchost.Hostname, error) {
	if s == "" {
		return "", httperr.BadRequest("host is empty")
	}
	// svchost refuses punycode input, so go through the display form.
	h, err := svchost.ForComparison(svchost.ForDisplay(s))
	if err != nil {
		return "", httperr.BadRequest("invalid host %q: %v", s, err)
	}
	if h.String() != s {
		return "", httperr.BadRequest("host %q is not in canonical form (want %q)", s, h.String())
	}
	// svchost lets trailing dots through ("example.com.", even "a.."):
	// one host would have several cache keys, and ".." has no place in a path.
	if addrs.TrailingDot(s) {
		return "", httperr.BadRequest("invalid host %q: trailing dot", s)
	}
	return h, nil
}

// parseVersion accepts a semantic version in the canonical form the
// clients request (they re-serialise "1.2" as "1.2.0").
func parseVersion(s string) (versions.Version, error) {
	if s == "" || len(s) > maxVersionLen {
		return versions.Version{}, httperr.BadRequest("invalid version %q", s)
	}
	v, err := addrs.ParseSemver(s)
	if err != nil {
		return versions.Version{}, httperr.BadRequest("invalid version %q: %v", s, err)
	}
	if v.String() != s {
		return versions.Version{}, httperr.BadRequest("version %q is not in canonical form (want %q)", s, v.String())
	}
	return v, nil
}

// parsePlatform parses "os_arch" from a request path.
func parsePlatform(s string) (addrs.Platform, error) {
	pl, err := addrs.ParsePlatform(s)
	if err != nil {
		return addrs.Platform{}, httperr.BadRequest("%v", err)
	}
	return pl, nil
}

// parseArchiveName parses an archive file name of a request path for a
// provider of type typ (addrs.ParseArchiveName), with a version in the
// canonical form the clients request.
func parseArchiveName(typ, name string) (versions.Version, addrs.Platform, error) {
	version, pl, err := addrs.ParseArchiveName(typ, name)
	if err != nil {
		return versions.Version{}, addrs.Platform{}, httperr.BadRequest("%v", err)
	}
	v, err := parseVersion(version)
	if err != nil {
		return versions.Version{}, addrs.Platform{}, err
	}
	return v, pl, nil
}

// unescapePart decodes one percent-encoded path segment and refuses what
// could change the meaning of the path: encoded slashes and backslashes,
// dot segments, control characters and invalid UTF-8.
func unescapePart(what, raw string, limit int) (string, error) {
	if len(raw) > 3*limit {
		return "", httperr.BadRequest("%s is too long", what)
	}
	s, err := url.PathUnescape(raw)
	if err != nil {
		return "", httperr.BadRequest("%s is not a valid path segment: %v", what, err)
	}
	if len(s) > limit {
		return "", httperr.BadRequest("%s is too long (at most %d bytes)", what, limit)
	}
	if s == "." || s == ".." {
		return "", httperr.BadRequest("%s may not be a dot segment", what)
	}
	if !utf8.ValidString(s) {
		return "", httperr.BadRequest("%s is not valid UTF-8", what)
	}
	for _, r := range s {
		if r == '/' || r == '\\' || unicode.IsControl(r) || unicode.IsSpace(r) {
			return "", httperr.BadRequest("%s contains a forbidden character %q", what, r)
		}
	}
	return s, nil
}
