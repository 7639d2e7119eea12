package proxy

// The provider registry protocol (providers.v1), served from the same
// engine as the network mirror protocol, one base URL per allowed origin
// host: RegistryPath(HOST). A CLI configuration's host block points the
// origin host's providers.v1 service at it; the clients then install as
// they do from the origin itself, check the origin's signature, and record
// every platform's zh: hash in the lock file.
//
//	GET /registry/HOST/v1/providers/NS/TYPE/versions
//	GET /registry/HOST/v1/providers/NS/TYPE/VERSION/download/OS/ARCH
//	GET /registry/HOST/v1/providers/NS/TYPE/VERSION/download/OS/ARCH/SHA256SUMS
//	GET /registry/HOST/v1/providers/NS/TYPE/VERSION/download/OS/ARCH/SHA256SUMS.sig
//
// The download answer is the origin's, with only download_url (this
// mirror's archive route, shared with the network mirror),
// shasums_url and shasums_signature_url (the SHA256SUMS document and
// signature that verified the package, byte for byte as the origin served
// them) pointing at the mirror, as URLs relative to the answer's own, so
// that they hold behind any path prefix.

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/gorilla/mux"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery/registryjson"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
)

// registryRoot is the first path segment of the registry protocol's routes.
const registryRoot = "registry"

// The files served beside a download answer.
const (
	sumsFile      = "SHA256SUMS"
	signatureFile = "SHA256SUMS.sig"
)

// downloadDepth is how many directories deep a download answer's URL is
// below the mirror's root: registry/HOST/v1/providers/NS/TYPE/VERSION/download/OS/.
const downloadDepth = 9

// RegistryPath is the path, below the mirror's base URL, of the
// providers.v1 service for origin host (in its comparison form), with the
// trailing slash the clients need.
func RegistryPath(host string) string {
	return registryRoot + "/" + host + "/v1/providers/"
}

// providerRegistry serves the provider registry protocol.
type providerRegistry struct {
	providerRoutes
}

// routes adds the registry protocol's routes to r.
func (g *providerRegistry) routes(r *mux.Router) {
	reg := r.PathPrefix("/"+registryRoot+"/{host}/v1/providers/").
		Methods(http.MethodGet, http.MethodHead).Subrouter()
	reg.Use(g.authorize(registryAuth))
	reg.HandleFunc("/{namespace}/{type}/versions", g.handleVersions)
	reg.HandleFunc("/{namespace}/{type}/{version}/download/{os}/{arch}", g.handleDownload)
	reg.HandleFunc("/{namespace}/{type}/{version}/download/{os}/{arch}/{file}", g.handleFile)
	reg.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.fail(w, r, &httperr.RequestError{Status: http.StatusNotFound,
			Msg: "not a provider registry path (want NAMESPACE/TYPE/versions or NAMESPACE/TYPE/VERSION/download/OS/ARCH)"})
	})
}

func (g *providerRegistry) handleVersions(w http.ResponseWriter, r *http.Request) {
	p, list, st, ok := g.versions(w, r)
	if !ok {
		return
	}
	doc := g.docs.registryVersions(p, list, func() document {
		vs := g.newVersions(list)
		// The answer is kept for every request until the list changes:
		// made whole, not cut short by this request's client leaving
		// (its versions are the cache's: no origin is asked).
		g.leaveOutUnsigned(context.WithoutCancel(r.Context()), p, list, &vs)
		return newDocument(renderJSON(vs))
	})
	writeDocument(w, r, doc, g.cacheControl(st.Stale), g.fail)
}

// leaveOutUnsigned takes out of vs, the versions answer of p made of
// list, each version imported without signature: it has no download
// answer (the protocol gives the publisher's signature), and Terraform
// would report the 404 as no package for the platform. A warning, which
// Terraform prints, names them and the network mirror, which serves
// them. Under an allowed origin (one of --allow-unsigned-hosts) they are
// the list's InHouse versions, known without asking the origin; under a
// host that is no allowed origin (an in-house host, whose versions were
// all imported), each version none of whose packages has signed
// evidence, read from the cache.
func (g *providerRegistry) leaveOutUnsigned(ctx context.Context, p addrs.Provider, list *records.VersionList, vs *registryjson.Versions) {
	origin := slices.Contains(g.engine.Config().AllowedOrigins, p.Hostname.String()) // in comparison form
	var unsigned []string
	vs.Versions = slices.DeleteFunc(vs.Versions, func(rv registryjson.Version) bool {
		if origin {
			if !slices.Contains(list.InHouse, rv.Version) {
				return false
			}
			unsigned = append(unsigned, rv.Version)
			return true
		}
		v, err := addrs.ParseSemver(rv.Version)
		if err != nil {
			return false
		}
		pkg, err := g.engine.Package(ctx, p, v, nil)
		if err != nil || len(pkg.Archives) == 0 || slices.ContainsFunc(pkg.Archives, func(a mirror.PlatformArchive) bool { return a.Evidence != nil }) {
			return false
		}
		unsigned = append(unsigned, rv.Version)
		return true
	})
	if len(unsigned) > 0 {
		vs.Warnings = append(vs.Warnings, fmt.Sprintf("%s %s: imported without signature, which the provider registry protocol cannot serve; install it through the mirror's network mirror (provider_installation { network_mirror { ... } })",
			p, strings.Join(unsigned, ", ")))
	}
}

// newVersions is the versions answer for list: every version with
// the origin's protocols and the platforms this mirror serves.
func (g *providerRegistry) newVersions(list *records.VersionList) registryjson.Versions {
	served := g.engine.Config().Platforms
	doc := registryjson.Versions{Versions: make([]registryjson.Version, 0, len(list.Versions))}
	for _, e := range list.Versions {
		rv := registryjson.Version{Version: e.Version, Protocols: e.Protocols, Platforms: make([]registryjson.Platform, 0, len(e.Platforms))}
		if rv.Protocols == nil {
			rv.Protocols = []string{}
		}
		for _, name := range e.Platforms {
			if len(served) > 0 && !slices.Contains(served, name) {
				continue
			}
			pl, err := addrs.ParsePlatform(name)
			if err != nil {
				continue
			}
			rv.Platforms = append(rv.Platforms, registryjson.Platform{OS: pl.OS, Arch: pl.Arch})
		}
		doc.Versions = append(doc.Versions, rv)
	}
	// Terraform prints these: the origin's (a deprecation notice), as on
	// a direct install, then why versions are missing from the list.
	if len(list.Warnings)+len(list.Held) > 0 {
		doc.Warnings = append(slices.Clone(list.Warnings), list.Held...)
	}
	return doc
}

// parseRegistryTarget parses the provider, version and platform of a
// download or file request. Whether the provider's host is served and
// the policy lets it through, the engine behind the policy
// (mirror/served) decides, once, in the call the request makes of it.
func parseRegistryTarget(r *http.Request) (addrs.Provider, versions.Version, addrs.Platform, error) {
	vars := mux.Vars(r)
	p, err := parseProvider(vars["host"], vars["namespace"], vars["type"])
	if err != nil {
		return p, versions.Version{}, addrs.Platform{}, err
	}
	rawVersion, err := unescapePart("version", vars["version"], maxVersionLen)
	if err != nil {
		return p, versions.Version{}, addrs.Platform{}, err
	}
	v, err := parseVersion(rawVersion)
	if err != nil {
		return p, v, addrs.Platform{}, err
	}
	goos, err := unescapePart("os", vars["os"], maxPartLen)
	if err != nil {
		return p, v, addrs.Platform{}, err
	}
	arch, err := unescapePart("arch", vars["arch"], maxPartLen)
	if err != nil {
		return p, v, addrs.Platform{}, err
	}
	if strings.Contains(goos, "_") {
		return p, v, addrs.Platform{}, httperr.BadRequest("invalid os %q", goos)
	}
	pl, err := parsePlatform(goos + "_" + arch)
	return p, v, pl, err
}

// evidence returns the verified evidence of pl, failing with
// records.ErrPlatformNotFound when the version has no package for it.
func (g *providerRegistry) evidence(r *http.Request, p addrs.Provider, v versions.Version, pl addrs.Platform) (*records.Evidence, records.PlatformEvidence, error) {
	ev, err := g.engine.Evidence(r.Context(), p, v, []addrs.Platform{pl})
	if err != nil {
		return nil, records.PlatformEvidence{}, err
	}
	pe, ok := ev.Platform(pl.String())
	if !ok {
		return nil, pe, fmt.Errorf("%w: %s %s has no package for %s", records.ErrPlatformNotFound, p, v, pl)
	}
	return ev, pe, nil
}

func (g *providerRegistry) handleDownload(w http.ResponseWriter, r *http.Request) {
	p, v, pl, err := parseRegistryTarget(r)
	if err != nil {
		g.fail(w, r, err)
		return
	}
	ev, _, err := g.evidence(r, p, v, pl)
	if err != nil {
		g.fail(w, r, err)
		return
	}
	pkg, _ := ev.Package(pl.String())
	archive := addrs.ArchiveName(p.Type, v.String(), pl.String())
	pkg.DownloadURL = strings.Repeat("../", downloadDepth) + p.Hostname.String() + "/" + p.Namespace + "/" + p.Type + "/" + archive
	pkg.SHASumsURL = pl.Arch + "/" + sumsFile
	pkg.SHASumsSignatureURL = pl.Arch + "/" + signatureFile
	if a := g.auth; a != nil {
		pkg.DownloadURL += "?" + a.sign(p, archive)
		pkg.SHASumsURL += "?" + a.sign(p, registryFileName(v, pl, sumsFile))
		pkg.SHASumsSignatureURL += "?" + a.sign(p, registryFileName(v, pl, signatureFile))
	}
	MarkStale(w, ev.Stale)
	writeDocument(w, r, newDocument(renderJSON(pkg)), g.cacheControl(ev.Stale), g.fail)
}

// registryFileName names a SHA256SUMS document or signature for URL
// signing: unlike an archive name, it has slashes.
func registryFileName(v versions.Version, pl addrs.Platform, file string) string {
	return registryRoot + "/" + v.String() + "/" + pl.String() + "/" + file
}

// handleFile serves the SHA256SUMS document, or its signature,
// that verified a package, byte for byte as the origin served it.
func (g *providerRegistry) handleFile(w http.ResponseWriter, r *http.Request) {
	p, v, pl, err := parseRegistryTarget(r)
	if err != nil {
		g.fail(w, r, err)
		return
	}
	file := mux.Vars(r)["file"]
	if file != sumsFile && file != signatureFile {
		g.fail(w, r, &httperr.RequestError{Status: http.StatusNotFound, Msg: fmt.Sprintf("unknown file %q (want %s or %s)", file, sumsFile, signatureFile)})
		return
	}
	ev, pe, err := g.evidence(r, p, v, pl)
	if err != nil {
		g.fail(w, r, err)
		return
	}
	doc := ev.Documents[pe.Document]
	body, contentType := doc.Content, sumsContentType
	if file == signatureFile {
		body, contentType = doc.Signature, signatureContentType
	}
	MarkStale(w, ev.Stale)
	writeFile(w, r, newDocument(body), contentType, g.cacheControl(ev.Stale), g.fail)
}

// Content types of the evidence files.
var (
	sumsContentType      = headerValue("text/plain; charset=utf-8")
	signatureContentType = headerValue("application/octet-stream")
)

// registryAuth guards the provider registry routes: the versions and
// download answers need a bearer token (the clients send the one
// configured for the origin's host name), the SHA256SUMS document and
// signature a signature. The signature is checked before the origin: a
// caller without one gets the same answer for any host, and learns
// nothing of the in-house ones.
var registryAuth = routeAuth{
	signed: func(r *http.Request) (addrs.Provider, string, bool, error) {
		file := mux.Vars(r)["file"]
		if file == "" {
			return addrs.Provider{}, "", false, nil
		}
		p, v, pl, err := parseRegistryTarget(r)
		if err != nil {
			return p, "", false, err
		}
		return p, registryFileName(v, pl, file), true, nil
	},
	badSignature: errBadRegistrySignature,
	unauthorized: registryUnauthorized,
}

// registryUnauthorized is the answer to a registry route's request
// without a valid bearer token.
func registryUnauthorized(r *http.Request) error {
	return &registryAuthError{host: mux.Vars(r)["host"]}
}

// registryAuthError is ErrUnauthorized on a registry route, saying which
// credentials block the clients read the token from there.
type registryAuthError struct{ host string }

func (e *registryAuthError) Error() string {
	return fmt.Sprintf("unauthorized: a valid bearer token is required (through a host block the clients send the token configured for the provider's host: credentials %q { token = ... } in the CLI configuration)", e.host)
}

func (e *registryAuthError) Unwrap() error { return httperr.ErrUnauthorized }

// errBadRegistrySignature is ErrBadSignature for a SHA256SUMS document or
// signature URL.
var errBadRegistrySignature = fmt.Errorf("%w: ask for the download answer again", httperr.ErrBadSignature)
