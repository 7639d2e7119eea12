package proxy

// The module registry protocol (modules.v1), one base URL per allowed
// origin host beside its providers.v1: ModulesPath(HOST).
//
//	GET /registry/HOST/v1/modules/NS/NAME/SYSTEM/versions
//	GET /registry/HOST/v1/modules/NS/NAME/SYSTEM/VERSION/download
//	GET /registry/HOST/v1/modules/NS/NAME/SYSTEM/VERSION/package.zip
//	GET /registry/HOST/v1/modules/NS/NAME/SYSTEM/VERSION/package.tar.gz
//
// The download answer is 200 with the package's location on this mirror
// both in the X-Terraform-Get header (which Terraform reads on 200 and
// 204) and as the JSON body's "location" (which OpenTofu reads on 200; on
// 204 it reads the header): "./package.zip" (the package with its links
// resolved, handleZip; the tar.gz stays served for the answers of an
// earlier release that clients hold), relative to the answer's
// own URL, with the origin location's //SUBDIR appended; absolute (the
// mirror's URL, mirrorURL) when the clients would not read that
// //SUBDIR back as it is written (relativeLocationKeeps). It is answered
// from the module's record without fetching the package, which the
// engine fetches from its source host when the client asks for that
// location.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/gorilla/mux"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
)

// ModuleEngine is what the module routes need from the engine: the
// module side of Engine, behind the package policy
// (*mirror/served.Packages implements it). Each of its calls decides
// whether the module's host is served and the policy lets it through,
// before anything else: the routes parse the request, make one call, and
// map its error.
type ModuleEngine interface {
	ModuleVersions(ctx context.Context, m addrs.Module) (*records.ModuleVersionList, modules.ListState, error)
	ModuleLocation(ctx context.Context, m addrs.Module, version versions.Version) (*records.ModuleRecord, error)
	OpenModule(ctx context.Context, m addrs.Module, version versions.Version) (*modules.Package, error)
	OpenModuleZip(ctx context.Context, m addrs.Module, version versions.Version) (*modules.Zip, error)
}

// modulePackageFile is the package's file name below its version, and
// moduleZipFile its zip's (links resolved): the one the download answer
// names.
const (
	modulePackageFile = "package.tar.gz"
	moduleZipFile     = "package.zip"
)

// ModulesPath is the path, below the mirror's base URL, of the modules.v1
// service for origin host (in its comparison form), with the trailing
// slash.
func ModulesPath(host string) string {
	return registryRoot + "/" + host + "/v1/modules/"
}

// moduleRegistry serves the module registry protocol.
type moduleRegistry struct {
	*responder
	engine ModuleEngine
	// mirrorURL is the mirror's base URL for r, ending in "/", and
	// whether it was read from r (statusPage.mirrorURLFrom).
	mirrorURL func(r *http.Request) (u string, fromRequest bool)
}

// routes adds the module registry protocol's routes to r.
func (mr *moduleRegistry) routes(r *mux.Router) {
	mod := r.PathPrefix("/"+registryRoot+"/{host}/v1/modules/").
		Methods(http.MethodGet, http.MethodHead).Subrouter()
	mod.Use(mr.authorize(mr.guard()))
	mod.HandleFunc("/{namespace}/{name}/{system}/versions", mr.handleVersions)
	mod.HandleFunc("/{namespace}/{name}/{system}/{version}/download", mr.handleDownload)
	mod.HandleFunc("/{namespace}/{name}/{system}/{version}/"+modulePackageFile, mr.handlePackage)
	mod.HandleFunc("/{namespace}/{name}/{system}/{version}/"+moduleZipFile, mr.handleZip)
	mod.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mr.fail(w, r, &httperr.RequestError{Status: http.StatusNotFound,
			Msg: "not a module registry path (want NAMESPACE/NAME/SYSTEM/versions or NAMESPACE/NAME/SYSTEM/VERSION/download)"})
	})
}

// module parses the request's module address. Whether its host is
// served and the policy lets it through, the engine behind the policy
// (mirror/served) decides, once, in the call the request makes of it.
func (mr *moduleRegistry) module(r *http.Request) (addrs.Module, error) {
	vars := mux.Vars(r)
	hostPart, err := unescapePart("host", vars["host"], maxHostLen)
	if err != nil {
		return addrs.Module{}, err
	}
	host, err := parseHost(hostPart)
	if err != nil {
		return addrs.Module{}, err
	}
	var parts [3]string
	for i, what := range []string{"namespace", "name", "system"} {
		v, err := unescapePart(what, vars[what], maxPartLen)
		if err != nil {
			return addrs.Module{}, err
		}
		parts[i] = v
	}
	m, err := addrs.NewModule(host, parts[0], parts[1], parts[2])
	if err != nil {
		return addrs.Module{}, httperr.BadRequest("%v", err)
	}
	return m, nil
}

// moduleVersion parses the request's module and version.
func (mr *moduleRegistry) moduleVersion(r *http.Request) (addrs.Module, versions.Version, error) {
	m, err := mr.module(r)
	if err != nil {
		return addrs.Module{}, versions.Version{}, err
	}
	version, err := requestModuleVersion(r)
	if err != nil {
		return addrs.Module{}, versions.Version{}, err
	}
	return m, version, nil
}

// requestModuleVersion parses the request's version, once, as the
// clients parse a module version (addrs.ParseModuleVersion: "v1.1.0" is
// 1.1.0); one that does not parse is a bad request.
func requestModuleVersion(r *http.Request) (versions.Version, error) {
	raw, err := unescapePart("version", mux.Vars(r)["version"], maxVersionLen)
	if err != nil {
		return versions.Version{}, err
	}
	v, err := addrs.ParseModuleVersion(raw)
	if err != nil {
		return versions.Version{}, httperr.BadRequest("invalid version %.140q", raw)
	}
	return v, nil
}

// moduleVersionsBody is the module registry's versions answer.
type moduleVersionsBody struct {
	Modules []moduleVersionsEntry `json:"modules"`
}

type moduleVersionsEntry struct {
	Source   string          `json:"source"`
	Versions []moduleVersion `json:"versions"`
}

type moduleVersion struct {
	Version string `json:"version"`
}

func (mr *moduleRegistry) handleVersions(w http.ResponseWriter, r *http.Request) {
	m, err := mr.module(r)
	if err != nil {
		mr.fail(w, r, err)
		return
	}
	list, st, err := mr.engine.ModuleVersions(r.Context(), m)
	if err != nil {
		mr.fail(w, r, err)
		return
	}
	MarkStale(w, st.Stale)
	body := moduleVersionsBody{Modules: []moduleVersionsEntry{{
		Source:   m.Namespace + "/" + m.Name + "/" + m.System,
		Versions: make([]moduleVersion, 0, len(list.Versions)),
	}}}
	for _, v := range list.Versions {
		body.Modules[0].Versions = append(body.Modules[0].Versions, moduleVersion{v})
	}
	writeDocument(w, r, newDocument(renderJSON(body)), mr.cacheControl(st.Stale), mr.fail)
}

// moduleLocation is the download answer's JSON body, as OpenTofu reads it.
type moduleLocation struct {
	Location string `json:"location"`
}

func (mr *moduleRegistry) handleDownload(w http.ResponseWriter, r *http.Request) {
	m, version, err := mr.moduleVersion(r)
	if err != nil {
		mr.fail(w, r, err)
		return
	}
	rec, err := mr.engine.ModuleLocation(r.Context(), m, version)
	if err != nil {
		mr.fail(w, r, err)
		return
	}
	loc := "./" + moduleZipFile
	if rec.Subdir != "" {
		loc += "//" + rec.Subdir
	}
	if a := mr.auth; a != nil {
		loc += "?" + a.sign(moduleSigner(m), moduleFileName(version, moduleZipFile))
	}
	if !relativeLocationKeeps(loc) {
		// Terraform and OpenTofu read a location starting "./" as a URL
		// and resolve it (url.URL.String), escaping what a URL path
		// cannot hold (a space, a letter outside ASCII), and then take
		// its //SUBDIR as it is written: "modules/my%20app", a directory
		// the package does not have. An absolute location is taken as it
		// is.
		base, fromRequest := mr.mirrorURL(r)
		if fromRequest {
			VaryByRequestURL(w)
		}
		p := strings.TrimPrefix(r.URL.EscapedPath(), "/")
		loc = base + p[:strings.LastIndexByte(p, '/')+1] + strings.TrimPrefix(loc, "./")
	}
	w.Header().Set("X-Terraform-Get", loc)
	writeDocument(w, r, newDocument(renderJSON(moduleLocation{Location: loc})), mr.cacheControl(false), mr.fail)
}

// relativeLocationKeeps reports whether the clients read the relative
// location loc back as it is written once they resolve it against the
// download answer's URL, as Terraform's and OpenTofu's registry clients
// do (url.Parse, URL.ResolveReference, URL.String).
func relativeLocationKeeps(loc string) bool {
	const base = "https://mirror.invalid/v/download"
	ref, err := url.Parse(loc)
	if err != nil {
		return false
	}
	b, _ := url.Parse(base)
	return b.ResolveReference(ref).String() == "https://mirror.invalid/v/"+strings.TrimPrefix(loc, "./")
}

func (mr *moduleRegistry) handlePackage(w http.ResponseWriter, r *http.Request) {
	m, version, err := mr.moduleVersion(r)
	if err != nil {
		mr.fail(w, r, err)
		return
	}
	pkg, err := mr.engine.OpenModule(r.Context(), m, version)
	if err != nil {
		mr.fail(w, r, err)
		return
	}
	defer pkg.Close()
	mr.serveFile(w, r, "application/gzip", pkg.SHA256, pkg.Source, pkg.ModTime, pkg.Content())
}

// handleZip serves the package as a zip with its links resolved, each a
// copy of what it names (modsource.WriteZip, the OCI door's layer): the
// file the download answer names. Terraform's and OpenTofu's module
// installers (go-getter) write a link entry of a tar as an empty file, so
// a package whose files include links (a module sharing a file of its
// repository by a link) would install with those files empty from the
// tar.gz, where a direct install from its source has them.
func (mr *moduleRegistry) handleZip(w http.ResponseWriter, r *http.Request) {
	m, version, err := mr.moduleVersion(r)
	if err != nil {
		mr.fail(w, r, err)
		return
	}
	z, err := mr.engine.OpenModuleZip(r.Context(), m, version)
	if err != nil {
		mr.fail(w, r, err)
		return
	}
	defer z.Close()
	mr.serveFile(w, r, "application/zip", z.Record.SHA256, z.Source, z.ModTime, z.Content())
}

// serveFile sends a module version's file from the cache (its package or
// its zip, of sha256 sha, found as src says), with Range and conditional
// requests.
func (mr *moduleRegistry) serveFile(w http.ResponseWriter, r *http.Request, contentType, sha string, src records.Source, modTime time.Time, content io.ReadSeeker) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("ETag", `"`+sha+`"`)
	h["Cache-Control"] = mr.cacheControl(false)
	h.Set("X-Tfmirror-Cache", src.String())
	ServeCached(w, r, modTime, content, mr.fail)
}

// moduleSigner and moduleFileName name a package for URL signing: the
// module as a provider whose type is NAME/SYSTEM, which no provider
// address can be.
func moduleSigner(m addrs.Module) addrs.Provider {
	return addrs.Provider{Hostname: m.Hostname, Namespace: m.Namespace, Type: m.Name + "/" + m.System}
}

func moduleFileName(version versions.Version, file string) string {
	return "module/" + version.String() + "/" + file
}

// guard says how the module registry routes are guarded: the versions and download
// answers need a bearer token (the one configured for the origin's host
// name), the package a signature.
func (mr *moduleRegistry) guard() routeAuth {
	return routeAuth{
		signed: func(r *http.Request) (addrs.Provider, string, bool, error) {
			file := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
			if file != modulePackageFile && file != moduleZipFile {
				return addrs.Provider{}, "", false, nil
			}
			m, version, err := mr.moduleVersion(r)
			if err != nil {
				return addrs.Provider{}, "", false, err
			}
			return moduleSigner(m), moduleFileName(version, file), true, nil
		},
		badSignature: fmt.Errorf("%w: ask for the download answer again", httperr.ErrBadSignature),
		unauthorized: registryUnauthorized,
	}
}

// moduleRoute classifies a path below /registry/HOST/v1/modules/ (parts
// are NS/NAME/SYSTEM/...) for metrics.
func moduleRoute(parts []string) string {
	switch {
	case len(parts) == 4 && parts[3] == "versions":
		return "module_versions"
	case len(parts) == 5 && parts[4] == "download":
		return "module_download"
	case len(parts) == 5 && (parts[4] == modulePackageFile || parts[4] == moduleZipFile):
		return "module_package"
	}
	return "other"
}
