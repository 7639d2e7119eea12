package discovery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery/registryjson"

	"github.com/tfmirror/tfmirror/v2/internal/jsonbound"
	"github.com/tfmirror/tfmirror/v2/internal/redact"
)

// VersionList is an origin's answer to a provider's versions request:
// the versions it lists, and the warnings it gives with them (a
// deprecation notice), which Terraform prints on a direct install.
type VersionList struct {
	Versions []VersionInfo
	// Warnings are the origin's, at most maxWarnings of at most
	// maxWarningBytes each, with control and format characters other
	// than line breaks and tabs left out (they are printed on a terminal).
	Warnings []string
}

// Bounds of the warnings taken from an origin's versions answer.
const (
	maxWarnings     = 8
	maxWarningBytes = 1024
)

// VersionInfo is one entry of an origin's versions list, as the origin
// wrote it (the version string is not validated here).
type VersionInfo struct {
	Version   string
	Protocols []string
	Platforms []addrs.Platform
}

// Package is an origin's package metadata for one version and platform:
// everything its package response said, checked, with its URLs made
// absolute.
type Package struct {
	// Protocols are the plugin protocol versions, as the origin gave them.
	Protocols []string
	OS, Arch  string
	Filename  string
	// The URLs are absolute https URLs, relative ones resolved against the
	// final URL of the package response. They may name other hosts.
	DownloadURL         string
	SHASumsURL          string
	SHASumsSignatureURL string
	// SHASum is the archive's sha256 as the origin states it (hex).
	SHASum string
	// SigningKeys are the origin's signing_keys.gpg_public_keys, in its
	// order, each with all its fields as given; entries without an
	// ascii_armor (no key at all) are left out.
	SigningKeys []registryjson.GPGPublicKey
	// Packages is the origin's "packages" (OpenTofu's hashes and sizes of
	// every platform's archive), as given; nil when it gave none.
	Packages map[string]registryjson.PackageHashes
}

// providerRegistry speaks the provider registry protocol (providers.v1)
// to origins.
type providerRegistry struct {
	tr        *transport
	discovery *discoverer
}

// Versions lists the versions of p that its origin registry offers. Entries
// without a version string are skipped. Errors: ErrHostNotAllowed (wrapped)
// when p's host is not allowed; ErrNotFound (wrapped) when the origin answers
// 404; ErrNoProviderService or *OriginError from service discovery;
// *OriginError with Op "versions"; the caller's context error.
func (c *Client) Versions(ctx context.Context, p addrs.Provider) (VersionList, error) {
	return c.providers.versions(ctx, p)
}

func (pr *providerRegistry) versions(ctx context.Context, p addrs.Provider) (_ VersionList, err error) {
	if err := pr.tr.checkHost(p.Hostname); err != nil {
		return VersionList{}, err
	}
	defer pr.tr.observe(p.Hostname, OpVersions, time.Now(), &err)
	u, err := pr.registryURL(ctx, p, p.Namespace, p.Type, "versions")
	if err != nil {
		return VersionList{}, err
	}
	r := request{p: p, op: OpVersions, u: u, accept: "application/json"}
	data, r, err := pr.tr.getJSON(ctx, r, "provider "+p.String())
	if err != nil {
		return VersionList{}, err
	}
	out, warnings, skipped, err := parseVersions(data)
	if err != nil {
		return VersionList{}, originError(r, 0, err)
	}
	for _, w := range warnings {
		pr.tr.log.LogAttrs(ctx, slog.LevelInfo, "origin registry warning",
			slog.String("provider", p.String()), slog.String("warning", w))
	}
	if skipped > 0 {
		pr.tr.log.LogAttrs(ctx, slog.LevelWarn, "origin lists versions without a version string; skipped",
			slog.String("provider", p.String()), slog.Int("count", skipped))
	}
	return VersionList{Versions: out, Warnings: warnings}, nil
}

// cleanWarnings returns the first maxWarnings non-empty warnings of ws,
// each cut to maxWarningBytes (on a character's boundary), without
// control and format characters (a terminal's escapes, reordering marks)
// other than line breaks and tabs, and valid UTF-8.
func cleanWarnings(ws []string) []string {
	var out []string
	for _, w := range ws {
		if len(out) == maxWarnings {
			break
		}
		w = strings.Map(func(r rune) rune {
			if r == '\n' || r == '\t' || !unicode.IsControl(r) && !unicode.Is(unicode.Cf, r) {
				return r
			}
			return -1
		}, strings.ToValidUTF8(w, "\uFFFD"))
		if len(w) > maxWarningBytes {
			cut := maxWarningBytes
			for cut > 0 && !utf8.RuneStart(w[cut]) {
				cut--
			}
			w = w[:cut]
		}
		if w = strings.TrimSpace(w); w != "" {
			out = append(out, w)
		}
	}
	return out
}

// parseVersions decodes a registry's versions response. It returns the
// entries that have a version string, the registry's warnings, and how many
// entries were skipped for having none.
func parseVersions(data []byte) (_ []VersionInfo, warnings []string, skipped int, _ error) {
	var body registryjson.Versions
	if err := decodeObject(data, &body); err != nil {
		return nil, nil, 0, err
	}
	if body.Versions == nil {
		return nil, nil, 0, errors.New(`response has no "versions" array`)
	}
	out := make([]VersionInfo, 0, len(body.Versions))
	for _, v := range body.Versions {
		if v.Version == "" {
			skipped++
			continue
		}
		vi := VersionInfo{Version: v.Version, Protocols: v.Protocols}
		for _, pl := range v.Platforms {
			vi.Platforms = append(vi.Platforms, addrs.Platform{OS: pl.OS, Arch: pl.Arch})
		}
		out = append(out, vi)
	}
	return out, cleanWarnings(body.Warnings), skipped, nil
}

// Package fetches the package metadata of p at version for pl. The response
// must echo pl and carry filename, shasum and all three URLs. Errors:
// ErrHostNotAllowed (wrapped) when p's host is not allowed; ErrNotFound
// (wrapped) when the origin answers 404; ErrNoProviderService or
// *OriginError from service discovery; *OriginError with Op "package"; the
// caller's context error.
func (c *Client) Package(ctx context.Context, p addrs.Provider, version string, pl addrs.Platform) (*Package, error) {
	return c.providers.pkg(ctx, p, version, pl)
}

func (pr *providerRegistry) pkg(ctx context.Context, p addrs.Provider, version string, pl addrs.Platform) (_ *Package, err error) {
	if err := pr.tr.checkHost(p.Hostname); err != nil {
		return nil, err
	}
	defer pr.tr.observe(p.Hostname, OpPackage, time.Now(), &err)
	u, err := pr.registryURL(ctx, p, p.Namespace, p.Type, version, "download", pl.OS, pl.Arch)
	if err != nil {
		return nil, err
	}
	r := request{p: p, op: OpPackage, u: u, accept: "application/json"}
	data, r, err := pr.tr.getJSON(ctx, r, fmt.Sprintf("package %s %s %s", p, version, pl))
	if err != nil {
		return nil, err
	}
	pkg, err := parsePackage(data, r.u, pl)
	if err != nil {
		return nil, originError(r, 0, err)
	}
	return pkg, nil
}

// parsePackage decodes a registry's package response for pl. Relative URLs
// in it are resolved against final, the URL the response came from; every
// URL must then be an absolute https URL.
func parsePackage(data []byte, final *url.URL, pl addrs.Platform) (*Package, error) {
	var body registryjson.Package
	if err := decodeObject(data, &body); err != nil {
		return nil, err
	}
	if body.OS != pl.OS || body.Arch != pl.Arch {
		return nil, fmt.Errorf("response is for platform %s_%s, not %s", body.OS, body.Arch, pl)
	}
	for _, f := range []struct{ name, v string }{
		{"filename", body.Filename}, {"shasum", body.SHASum}, {"download_url", body.DownloadURL},
		{"shasums_url", body.SHASumsURL}, {"shasums_signature_url", body.SHASumsSignatureURL},
	} {
		if f.v == "" {
			return nil, fmt.Errorf("response has no %s", f.name)
		}
	}
	pkg := &Package{
		Protocols: body.Protocols,
		OS:        body.OS,
		Arch:      body.Arch,
		Filename:  body.Filename,
		SHASum:    body.SHASum,
		Packages:  body.Packages,
	}
	for _, f := range []struct {
		name string
		raw  string
		dst  *string
	}{
		{"download_url", body.DownloadURL, &pkg.DownloadURL},
		{"shasums_url", body.SHASumsURL, &pkg.SHASumsURL},
		{"shasums_signature_url", body.SHASumsSignatureURL, &pkg.SHASumsSignatureURL},
	} {
		ref, err := url.Parse(f.raw)
		if err != nil {
			// Not url.Parse's words, which quote the URL whole, query
			// (a pre-signed URL's signature) included: what it found
			// wrong.
			return nil, fmt.Errorf("%s is not a URL: %v", f.name, stripURL(err))
		}
		abs := final.ResolveReference(ref)
		if abs.Scheme != "https" || abs.Host == "" {
			return nil, fmt.Errorf("%s %q is not an https URL", f.name, redact.URL(abs))
		}
		*f.dst = abs.String()
	}
	for _, k := range body.SigningKeys.GPGPublicKeys {
		if k.ASCIIArmor != "" {
			pkg.SigningKeys = append(pkg.SigningKeys, k)
		}
	}
	return pkg, nil
}

// decodeObject decodes data, which must be a JSON object, into v: every
// registry answer the client decodes comes through here. The answer's
// bytes are bounded by the transport; its nesting and element count are
// bounded here, before it is decoded (jsonbound's defaults: 32 levels,
// 1,048,576 elements, some twenty times the largest real versions
// answer), so that a document of millions of empty objects cannot decode
// into gigabytes. One over them is ErrTooLarge.
func decodeObject(data []byte, v any) error {
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return errors.New("response is not a JSON object")
	}
	if err := jsonbound.Check(data, jsonbound.Limits{}); err != nil {
		return fmt.Errorf("%w: %v", ErrTooLarge, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("malformed JSON response: %w", err)
	}
	return nil
}

// registryURL resolves path segments, each escaped, against host's
// providers.v1 base URL.
func (pr *providerRegistry) registryURL(ctx context.Context, p addrs.Provider, segments ...string) (*url.URL, error) {
	base, err := pr.discovery.providersURL(ctx, p.Hostname)
	if err != nil {
		return nil, err
	}
	esc := make([]string, len(segments))
	for i, s := range segments {
		if s == "" || s == "." || s == ".." {
			return nil, fmt.Errorf("discovery: invalid path segment %q for %s", s, p)
		}
		esc[i] = url.PathEscape(s)
	}
	// "./" keeps a first segment containing ':' from reading as a scheme.
	ref, err := url.Parse("./" + strings.Join(esc, "/"))
	if err != nil {
		return nil, fmt.Errorf("discovery: building registry URL for %s: %w", p, err)
	}
	return base.ResolveReference(ref), nil
}
