package admin

// Admin operations on registry modules, for `tfmirror sync`:
//
//	POST /v1/module/versions {"module"}                  -> ["1.0.0", ...]
//	POST /v1/module/unpack   {"module","version","dir"}  -> Module
//
// unpack makes sure the package of the module version is cached (fetching
// it from its source host if need be) and writes its files under dir, a
// directory of the caller's on this machine, so that the caller can read
// the module's configuration.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/safetree"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// ModuleRequest names a registry module (HOST/NAMESPACE/NAME/SYSTEM),
// a version and, for unpack, an empty directory.
type ModuleRequest struct {
	Module  string `json:"module"`
	Version string `json:"version,omitempty"`
	Dir     string `json:"dir,omitempty"`
}

// Module is a module version whose package is cached.
type Module struct {
	Version string `json:"version"`
	// Subdir is the subdirectory of the package the clients use (the
	// origin location's //SUBDIR), "" for its root.
	Subdir string `json:"subdir,omitempty"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// CachedAlready says the package was cached before this call.
	CachedAlready bool `json:"cached_already"`
}

// ModuleVersions lists the versions of module m. A sync asks it first
// for each module: what the origin was last heard to lack of m is
// forgotten, so that the origin is asked.
func (a *API) ModuleVersions(ctx context.Context, m addrs.Module) ([]string, error) {
	a.engine.NotFound().ForgetModule(m)
	list, _, err := a.pkgs.ModuleVersions(ctx, m)
	if err != nil {
		return nil, err
	}
	return append([]string{}, list.Versions...), nil
}

// UnpackModule makes sure the package of version of m is cached and
// writes its files under dir, which must be an absolute path to an
// existing empty directory. version is parsed here, once
// (addrs.ParseModuleVersion: "v1.1.0" is 1.1.0); one that does not parse
// is a bad request.
func (a *API) UnpackModule(ctx context.Context, m addrs.Module, version, dir string) (Module, error) {
	v, err := addrs.ParseModuleVersion(version)
	if err != nil {
		return Module{}, httperr.BadRequest("%v", err)
	}
	if !filepath.IsAbs(dir) {
		return Module{}, httperr.BadRequest("dir %q is not an absolute path", dir)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) > 0 {
		return Module{}, httperr.BadRequest("dir %q is not an existing empty directory", dir)
	}
	pkg, err := a.pkgs.OpenModule(ctx, m, v)
	if err != nil {
		return Module{}, err
	}
	defer pkg.Close()
	limits := a.engine.Config().ModuleLimits
	if err := modsource.Unpack(ctx, pkg.Content(), dir, limits); err != nil {
		if errors.Is(err, safetree.ErrUnsafe) {
			// A package cached before every package's links were
			// checked: damaged (tfmirror cache verify says so too).
			return Module{}, &verify.Error{Reason: verify.ReasonBadArchive, Detail: fmt.Sprintf("the cached package of module %s %s: %v", m, version, err)}
		}
		return Module{}, fmt.Errorf("unpacking module %s %s: %w", m, version, err)
	}
	return Module{Version: pkg.Record.Version, Subdir: pkg.Record.Subdir, SHA256: pkg.SHA256, Size: pkg.Size,
		CachedAlready: pkg.Source == records.Hit}, nil
}

// moduleRoutes adds the module operations to mux.
func (a *API) moduleRoutes(mux *http.ServeMux) {
	parse := func(req ModuleRequest) (addrs.Module, []any, error) {
		attrs := []any{"module", req.Module, "version", req.Version}
		m, err := addrs.ParseModule(req.Module)
		if err != nil {
			return m, attrs, httperr.BadRequest("%v", err)
		}
		return m, attrs, nil
	}
	mux.HandleFunc("POST /v1/module/versions", handle(a, slog.LevelDebug, "admin sync: module versions listed", func(ctx context.Context, req ModuleRequest) (any, []any, error) {
		m, attrs, err := parse(req)
		if err != nil {
			return nil, attrs, err
		}
		res, err := a.ModuleVersions(ctx, m)
		return res, append(attrs, "versions", len(res)), err
	}))
	mux.HandleFunc("POST /v1/module/unpack", handle(a, slog.LevelInfo, "admin sync: module package ensured", func(ctx context.Context, req ModuleRequest) (any, []any, error) {
		m, attrs, err := parse(req)
		if err != nil {
			return nil, attrs, err
		}
		res, err := a.UnpackModule(ctx, m, req.Version, req.Dir)
		if err != nil {
			return nil, attrs, err
		}
		return res, append(attrs, "dir", req.Dir, "fetched", !res.CachedAlready, "bytes", res.Size, "sha256", res.SHA256), nil
	}))
}
