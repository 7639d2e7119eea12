package proxy

// The module registry protocol (modules.v1), one base URL per allowed
// origin host beside its providers.v1: ModulesPath(HOST).
//
//	GET /registry/HOST/v1/modules/NS/NAME/SYSTEM/versions
//	GET /registry/HOST/v1/modules/NS/NAME/SYSTEM/VERSION/download
//	GET /registry/HOST/v1/modules/NS/NAME/SYSTEM/VERSION/package.tar.gz
//
// The download answer is 200 with the package's location on this mirror
// both in the X-Terraform-Get header (which Terraform reads on 200 and
// 204) and as the JSON body's "location" (which OpenTofu reads on 200; on
// 204 it reads the header): "./package.tar.gz", relative to the answer's
// own URL, with the origin location's //SUBDIR appended. It is answered
// from the module's record without fetching the package, which the
// engine fetches from its source host when the client asks for that
// location.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gorilla/mux"

	"github.com/tfmirror/tfmirror/addrs"
	"github.com/tfmirror/tfmirror/mirror"
	"github.com/tfmirror/tfmirror/proxy/httperr"
)

// ModuleEngine is what the module routes need from the engine: the
// module side of Engine (*mirror.Modules).
type ModuleEngine interface {
	CheckModuleOrigin(m addrs.Module) error
	ModuleVersions(ctx context.Context, m addrs.Module) (*mirror.ModuleVersionList, mirror.ListState, error)
	ModuleLocation(ctx context.Context, m addrs.Module, version string) (*mirror.ModuleRecord, error)
	OpenModule(ctx context.Context, m addrs.Module, version string) (*mirror.ModulePackage, error)
	ListCachedModulesAfter(prefix, after string, fn func(mirror.CachedModule) error) error
}

// modulePackageFile is the package's file name below its version.
const modulePackageFile = "package.tar.gz"

// ModulesPath is the path, below the mirror's base URL, of the modules.v1
// service for origin host (in its comparison form), with the trailing
// slash.
func ModulesPath(host string) string {
	return registryRoot + "/" + host + "/v1/modules/"
}

// moduleRoutes adds the module registry protocol's routes to r.
func (s *Server) moduleRoutes(r *mux.Router) {
	mod := r.PathPrefix("/"+registryRoot+"/{host}/v1/modules/").
		Methods(http.MethodGet, http.MethodHead).Subrouter()
	mod.Use(s.authorize(s.moduleAuth()))
	mod.HandleFunc("/{namespace}/{name}/{system}/versions", s.handleModuleVersions)
	mod.HandleFunc("/{namespace}/{name}/{system}/{version}/download", s.handleModuleDownload)
	mod.HandleFunc("/{namespace}/{name}/{system}/{version}/"+modulePackageFile, s.handleModulePackage)
	mod.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, &httperr.RequestError{Status: http.StatusNotFound,
			Msg: "not a module registry path (want NAMESPACE/NAME/SYSTEM/versions or NAMESPACE/NAME/SYSTEM/VERSION/download)"})
	})
}

// module parses the request's module address and checks its host.
func (s *Server) module(r *http.Request) (ModuleEngine, addrs.Module, error) {
	var me ModuleEngine = s.engine.Modules()
	vars := mux.Vars(r)
	hostPart, err := unescapePart("host", vars["host"], maxHostLen)
	if err != nil {
		return nil, addrs.Module{}, err
	}
	host, err := parseHost(hostPart)
	if err != nil {
		return nil, addrs.Module{}, err
	}
	m := addrs.Module{Hostname: host}
	for _, part := range []struct {
		what string
		dst  *string
	}{{"namespace", &m.Namespace}, {"name", &m.Name}, {"system", &m.System}} {
		v, err := unescapePart(part.what, vars[part.what], maxPartLen)
		if err != nil {
			return nil, m, err
		}
		if err := addrs.CheckModulePart(part.what, v); err != nil {
			return nil, m, httperr.BadRequest("%v", err)
		}
		if part.what == "system" {
			v = strings.ToLower(v) // as addrs.ParseModule
		}
		*part.dst = v
	}
	return me, m, me.CheckModuleOrigin(m)
}

// moduleVersion parses the request's module and version.
func (s *Server) moduleVersion(r *http.Request) (ModuleEngine, addrs.Module, string, error) {
	me, m, err := s.module(r)
	if err != nil {
		return nil, addrs.Module{}, "", err
	}
	version, err := requestModuleVersion(r)
	if err != nil {
		return nil, addrs.Module{}, "", err
	}
	return me, m, version, nil
}

// requestModuleVersion parses the request's version.
func requestModuleVersion(r *http.Request) (string, error) {
	v, err := unescapePart("version", mux.Vars(r)["version"], maxVersionLen)
	if err != nil {
		return "", err
	}
	if strings.ContainsAny(v, "/\\") || v == "." || v == ".." {
		return "", httperr.BadRequest("invalid version %q", v)
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

func (s *Server) handleModuleVersions(w http.ResponseWriter, r *http.Request) {
	me, m, err := s.module(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	list, st, err := me.ModuleVersions(r.Context(), m)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	markStale(w, st.Stale)
	body := moduleVersionsBody{Modules: []moduleVersionsEntry{{
		Source:   m.Namespace + "/" + m.Name + "/" + m.System,
		Versions: make([]moduleVersion, 0, len(list.Versions)),
	}}}
	for _, v := range list.Versions {
		body.Modules[0].Versions = append(body.Modules[0].Versions, moduleVersion{v})
	}
	writeDocument(w, r, newDocument(renderJSON(body)), s.cacheControl(kindIndex, st.Stale))
}

// moduleLocation is the download answer's JSON body, as OpenTofu reads it.
type moduleLocation struct {
	Location string `json:"location"`
}

func (s *Server) handleModuleDownload(w http.ResponseWriter, r *http.Request) {
	me, m, version, err := s.moduleVersion(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rec, err := me.ModuleLocation(r.Context(), m, version)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	loc := "./" + modulePackageFile
	if rec.Subdir != "" {
		loc += "//" + rec.Subdir
	}
	if a := s.cfg.Auth; a != nil {
		loc += "?" + a.sign(moduleSigner(m), moduleFileName(version))
	}
	w.Header().Set("X-Terraform-Get", loc)
	writeDocument(w, r, newDocument(renderJSON(moduleLocation{Location: loc})), s.cacheControl(kindVersion, false))
}

func (s *Server) handleModulePackage(w http.ResponseWriter, r *http.Request) {
	me, m, version, err := s.moduleVersion(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	pkg, err := me.OpenModule(r.Context(), m, version)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer pkg.Close()
	h := w.Header()
	h.Set("Content-Type", "application/gzip")
	h.Set("ETag", `"`+pkg.SHA256+`"`)
	h["Cache-Control"] = s.cacheControl(kindArchive, false)
	h.Set("X-Tfmirror-Cache", pkg.Source.String())
	http.ServeContent(w, r, "", pkg.ModTime, pkg.Content())
}

// moduleSigner and moduleFileName name a package for URL signing: the
// module as a provider whose type is NAME/SYSTEM, which no provider
// address can be.
func moduleSigner(m addrs.Module) addrs.Provider {
	return addrs.Provider{Hostname: m.Hostname, Namespace: m.Namespace, Type: m.Name + "/" + m.System}
}

func moduleFileName(version string) string { return "module/" + version + "/" + modulePackageFile }

// moduleAuth guards the module registry routes: the versions and download
// answers need a bearer token (the one configured for the origin's host
// name), the package a signature.
func (s *Server) moduleAuth() routeAuth {
	return routeAuth{
		signed: func(r *http.Request) (addrs.Provider, string, bool, error) {
			if !strings.HasSuffix(r.URL.Path, "/"+modulePackageFile) {
				return addrs.Provider{}, "", false, nil
			}
			_, m, version, err := s.moduleVersion(r)
			if err != nil {
				return addrs.Provider{}, "", false, err
			}
			return moduleSigner(m), moduleFileName(version), true, nil
		},
		badSignature: fmt.Errorf("%w: ask for the download answer again", httperr.ErrBadSignature),
		unauthorized: registryUnauthorized,
	}
}

// StatusModule is one registry module the mirror has records of, for the
// status page.
type StatusModule struct {
	Address  string                `json:"address"` // HOST/NAMESPACE/NAME/SYSTEM
	Versions []StatusModuleVersion `json:"versions"`
}

// StatusModuleVersion is one version of a module: where its package comes
// from and whether it is cached.
type StatusModuleVersion struct {
	Version string `json:"version"`
	// Source is the package's location without its subdirectory and
	// its secrets (see package redact: a pre-signed URL's query is not
	// shown); Subdir the subdirectory the clients use.
	Source string `json:"source"`
	Subdir string `json:"subdir,omitempty"`
	Commit string `json:"commit,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Cached bool   `json:"cached"`
	Size   int64  `json:"size,omitempty"`
}

// statusModules lists the module versions the engine has records of
// that q selects, by module, newest version first within the page, and
// the cursor of the next page ("" when this is the last).
func (s *Server) statusModules(q statusQuery) ([]StatusModule, string, error) {
	var me ModuleEngine = s.engine.Modules()
	byModule := map[string]*StatusModule{}
	var order []string
	rows, next := 0, ""
	err := me.ListCachedModulesAfter(q.Prefix, q.ModuleAfter, func(cm mirror.CachedModule) error {
		if rows == q.Limit {
			return errPageFull
		}
		rows++
		next = cm.Cursor()
		m, ok := byModule[cm.Module]
		if !ok {
			m = &StatusModule{Address: cm.Module}
			byModule[cm.Module] = m
			order = append(order, cm.Module)
		}
		v := StatusModuleVersion{Version: cm.Version, Source: cm.Record.Shown(), Subdir: cm.Record.Subdir,
			Commit: cm.Record.Commit, SHA256: cm.Record.SHA256, Cached: cm.Cached}
		if cm.Cached {
			v.Size = cm.Record.Size
		}
		m.Versions = append(m.Versions, v)
		return nil
	})
	switch {
	case errors.Is(err, errPageFull):
	case err != nil:
		return nil, "", err
	default:
		next = "" // the listing ended within the page
	}
	out := make([]StatusModule, 0, len(order))
	for _, addr := range order { // key order: sorted
		m := byModule[addr]
		vs := make([]string, len(m.Versions))
		for i, v := range m.Versions {
			vs[i] = v.Version
		}
		mirror.SortModuleVersions(vs)
		sorted := make([]StatusModuleVersion, 0, len(vs))
		for _, v := range vs {
			for _, mv := range m.Versions {
				if mv.Version == v {
					sorted = append(sorted, mv)
					break
				}
			}
		}
		m.Versions = sorted
		out = append(out, *m)
	}
	return out, next, nil
}

// moduleRoute classifies a path below /registry/HOST/v1/modules/ (parts
// are NS/NAME/SYSTEM/...) for metrics.
func moduleRoute(parts []string) string {
	switch {
	case len(parts) == 4 && parts[3] == "versions":
		return "module_versions"
	case len(parts) == 5 && parts[4] == "download":
		return "module_download"
	case len(parts) == 5 && parts[4] == modulePackageFile:
		return "module_package"
	}
	return "other"
}
