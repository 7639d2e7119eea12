package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tfmirror/tfmirror/airgap"
	"github.com/tfmirror/tfmirror/discovery"
	"github.com/tfmirror/tfmirror/mirror"
)

// This file is the local admin API: what `tfmirror sync`, `export` and
// `import` ask of the engine, as Go methods for a command that opened
// the engine itself and as JSON over HTTP for one that reaches a running
// `tfmirror serve` through its unix socket in the data directory. Both go
// through the same methods, so a package is fetched and verified the same
// way whichever door it comes through, and exactly as for a client.

// AdminVersion is one version of a provider and the platforms its origin
// lists for it.
type AdminVersion struct {
	Version   string   `json:"version"`
	Platforms []string `json:"platforms"`
}

// AdminArchive is the verified package of one platform of a version.
type AdminArchive struct {
	Platform string `json:"platform"`
	Filename string `json:"filename"`
	SHA256   string `json:"sha256"`
	// Cached says the archive is in the cache; Size is then its size.
	Cached bool  `json:"cached"`
	Size   int64 `json:"size,omitempty"`
}

// AdminEnsured is the result of making sure one archive is cached.
type AdminEnsured struct {
	SHA256 string `json:"sha256"`
	// Bytes is the archive's size.
	Bytes int64 `json:"bytes"`
	// CachedAlready says the archive was in the cache before the call.
	CachedAlready bool `json:"cached_already"`
	// Source is the mirror.Source: hit, miss or coalesced.
	Source string `json:"source"`
}

// AdminRequest is the body of every admin API call; each uses the fields
// it needs.
type AdminRequest struct {
	Provider  string   `json:"provider"` // HOST/NAMESPACE/TYPE
	Version   string   `json:"version,omitempty"`
	Platform  string   `json:"platform,omitempty"`
	Platforms []string `json:"platforms,omitempty"`
}

// AdminError is the body of an admin API call that failed.
type AdminError struct {
	Error string `json:"error"`
}

// AdminExportRequest asks for an export (airgap.Export) to Out, an
// absolute path the serving process writes; empty lists select all.
type AdminExportRequest struct {
	Out       string   `json:"out"`
	Providers []string `json:"providers,omitempty"` // HOST/NAMESPACE/TYPE
	Versions  []string `json:"versions,omitempty"`
	Platforms []string `json:"platforms,omitempty"`
}

// AdminExported is the result of an export: its summary and one line per
// version that failed.
type AdminExported struct {
	airgap.ExportSummary
	Failures []string `json:"failures,omitempty"`
}

// AdminImportRequest asks for an import (airgap.Import) of In, an
// absolute path the serving process reads; Shown is In as the user named
// it, for messages.
type AdminImportRequest struct {
	In            string `json:"in"`
	Shown         string `json:"shown,omitempty"`
	AllowUnsigned bool   `json:"allow_unsigned,omitempty"`
}

// AdminImported is the result of an import: its summary and one line per
// version refused.
type AdminImported struct {
	airgap.ImportSummary
	Failures []string `json:"failures,omitempty"`
}

// AdminMetrics receives what the admin API did. *metrics.Metrics implements it.
type AdminMetrics interface {
	// Synced records a package asked for with its outcome (fetched,
	// cached, failed) and the bytes fetched for it.
	Synced(outcome string, fetchedBytes int64)
	// AirGap records what an export or import (op) did: packages by
	// outcome (exported or imported, present, failed) and the bytes
	// written or imported.
	AirGap(op string, packages map[string]int, bytes int64)
}

// AdminOptions configure an Admin.
type AdminOptions struct {
	// ScratchDir is where an import unpacks a tar file; default
	// os.TempDir(). tfmirror uses the data directory: it is where the
	// space is.
	ScratchDir string
	// MaxFileBytes bounds each file of an imported tar file; default 1 GiB.
	MaxFileBytes int64
	// ExportKey returns the key that signs an export's manifest; nil:
	// exports fail.
	ExportKey func() (*airgap.ExportKey, error)
	// Trust is what an import trusts: the serving process's keys, never
	// a caller's.
	Trust airgap.Trust
}

// Admin runs admin operations on an engine.
type Admin struct {
	engine  *mirror.Engine
	log     *slog.Logger
	metrics AdminMetrics
	opts    AdminOptions
}

// NewAdmin returns the admin operations of engine. A nil logger discards;
// a nil metrics records nothing.
func NewAdmin(engine *mirror.Engine, logger *slog.Logger, met AdminMetrics, opts AdminOptions) *Admin {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Admin{engine: engine, log: logger, metrics: met, opts: opts}
}

// Export exports the cached packages req selects to req.Out through
// airgap.Export.
func (a *Admin) Export(ctx context.Context, req AdminExportRequest) (AdminExported, error) {
	var res AdminExported
	if !filepath.IsAbs(req.Out) {
		return res, badRequest("out %q: want an absolute path", req.Out)
	}
	var sel airgap.Selection
	for _, s := range req.Providers {
		p, err := airgap.ParseProvider(s)
		if err != nil {
			return res, badRequest("%v", err)
		}
		sel.Providers = append(sel.Providers, p)
	}
	for _, s := range req.Versions {
		v, err := mirror.ParseSemver(s)
		if err != nil {
			return res, badRequest("version %q: %v", s, err)
		}
		sel.Versions = append(sel.Versions, v.String())
	}
	for _, s := range req.Platforms {
		if _, err := mirror.ParsePlatform(s); err != nil {
			return res, badRequest("%v", err)
		}
		sel.Platforms = append(sel.Platforms, s)
	}
	if a.opts.ExportKey == nil {
		return res, fmt.Errorf("no export key is configured to sign the export's manifest")
	}
	key, err := a.opts.ExportKey()
	if err != nil {
		return res, fmt.Errorf("export key: %w", err)
	}
	sum, err := airgap.Export(ctx, a.engine, sel, req.Out, key, func(line string) { res.Failures = append(res.Failures, line) })
	res.ExportSummary = sum
	if a.metrics != nil {
		a.metrics.AirGap("export", map[string]int{"exported": sum.Written, "present": sum.Present, "failed": sum.Failed}, sum.Bytes)
	}
	return res, err
}

// Import imports req.In into the cache through airgap.Import.
func (a *Admin) Import(ctx context.Context, req AdminImportRequest) (AdminImported, error) {
	var res AdminImported
	if !filepath.IsAbs(req.In) {
		return res, badRequest("in %q: want an absolute path", req.In)
	}
	sum, err := airgap.Import(ctx, a.engine, req.In, airgap.ImportOptions{
		Trust:         a.opts.Trust,
		AllowUnsigned: req.AllowUnsigned,
		Shown:         req.Shown,
		ScratchDir:    a.opts.ScratchDir,
		MaxFileBytes:  a.opts.MaxFileBytes,
	}, func(line string) { res.Failures = append(res.Failures, line) })
	res.ImportSummary = sum
	if a.metrics != nil {
		a.metrics.AirGap("import", map[string]int{"imported": sum.Imported, "present": sum.Present, "failed": sum.Failed}, sum.Bytes)
	}
	return res, err
}

// parseAddress parses a provider address HOST/NAMESPACE/TYPE in the form
// the engine uses.
func parseAddress(s string) (discovery.Provider, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return discovery.Provider{}, badRequest("provider %q: want HOST/NAMESPACE/TYPE", s)
	}
	return parseProvider(parts[0], parts[1], parts[2])
}

// Versions returns p's versions, oldest first as the origin lists them.
func (a *Admin) Versions(ctx context.Context, p discovery.Provider) ([]AdminVersion, error) {
	list, _, err := a.engine.Versions(ctx, p)
	if err != nil {
		return nil, err
	}
	out := make([]AdminVersion, 0, len(list.Versions))
	for _, e := range list.Versions {
		out = append(out, AdminVersion{Version: e.Version, Platforms: slices.Clone(e.Platforms)})
	}
	return out, nil
}

// Package returns the verified packages of version of p for platforms
// (fetching and verifying their metadata, not the archives), and whether
// each archive is cached. Empty platforms means every platform of the
// version that the engine serves. Platforms without a package are left
// out.
func (a *Admin) Package(ctx context.Context, p discovery.Provider, version string, platforms []string) ([]AdminArchive, error) {
	v, err := mirror.ParseSemver(version)
	if err != nil {
		return nil, badRequest("version %q: %v", version, err)
	}
	var pls []discovery.Platform // nil: all
	for _, s := range platforms {
		pl, err := mirror.ParsePlatform(s)
		if err != nil {
			return nil, badRequest("%v", err)
		}
		pls = append(pls, pl)
	}
	pkg, err := a.engine.Package(ctx, p, v, pls)
	if err != nil {
		return nil, err
	}
	out := make([]AdminArchive, 0, len(pkg.Archives))
	for _, arc := range pkg.Archives {
		aa := AdminArchive{Platform: arc.Platform, Filename: arc.Filename, SHA256: arc.SHA256}
		aa.Size, aa.Cached = a.engine.CachedSize(arc.SHA256)
		out = append(out, aa)
	}
	return out, nil
}

// Ensure makes sure the archive of version of p for platform is cached:
// through the engine's EnsureArchive, fetched and verified exactly as for
// a client.
func (a *Admin) Ensure(ctx context.Context, p discovery.Provider, version, platform string) (AdminEnsured, error) {
	res, err := a.ensure(ctx, p, version, platform)
	if a.metrics != nil {
		switch {
		case err != nil:
			a.metrics.Synced("failed", 0)
		case res.CachedAlready:
			a.metrics.Synced("cached", 0)
		default:
			a.metrics.Synced("fetched", res.Bytes)
		}
	}
	return res, err
}

func (a *Admin) ensure(ctx context.Context, p discovery.Provider, version, platform string) (AdminEnsured, error) {
	v, err := mirror.ParseSemver(version)
	if err != nil {
		return AdminEnsured{}, badRequest("version %q: %v", version, err)
	}
	pl, err := mirror.ParsePlatform(platform)
	if err != nil {
		return AdminEnsured{}, badRequest("%v", err)
	}
	pkg, err := a.engine.Package(ctx, p, v, []discovery.Platform{pl})
	if err != nil {
		return AdminEnsured{}, err
	}
	if len(pkg.Archives) == 0 {
		return AdminEnsured{}, fmt.Errorf("%w: %s %s has no package for %s", mirror.ErrPlatformNotFound, p, v, pl)
	}
	sha := pkg.Archives[0].SHA256
	src, err := a.engine.EnsureArchive(ctx, p, v, pl)
	if err != nil {
		return AdminEnsured{}, err
	}
	size, ok := a.engine.CachedSize(sha)
	if !ok {
		return AdminEnsured{}, fmt.Errorf("archive %s was cached and is gone again (evicted: is --cache-max-bytes too small?)", pkg.Archives[0].Filename)
	}
	return AdminEnsured{SHA256: sha, Bytes: size, CachedAlready: src == mirror.Hit, Source: src.String()}, nil
}

// maxAdminRequest bounds an admin request body.
const maxAdminRequest = 64 << 10

// Handler serves the admin API, for a unix socket only (it has no
// authentication: the socket's file mode is its access control):
//
//	POST /v1/versions {"provider"}                          -> [AdminVersion]
//	POST /v1/package  {"provider","version","platforms"}    -> [AdminArchive]
//	POST /v1/ensure   {"provider","version","platform"}     -> AdminEnsured
//	POST /v1/export   AdminExportRequest                    -> AdminExported
//	POST /v1/import   AdminImportRequest                    -> AdminImported
//	POST /v1/prune    AdminPruneRequest                     -> AdminPruned
//
// Errors answer the status statusOf gives and an AdminError.
func (a *Admin) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/versions", a.serve(func(ctx context.Context, p discovery.Provider, r AdminRequest) (any, error) {
		return a.Versions(ctx, p)
	}))
	mux.HandleFunc("POST /v1/package", a.serve(func(ctx context.Context, p discovery.Provider, r AdminRequest) (any, error) {
		return a.Package(ctx, p, r.Version, r.Platforms)
	}))
	mux.HandleFunc("POST /v1/ensure", a.serve(func(ctx context.Context, p discovery.Provider, r AdminRequest) (any, error) {
		return a.Ensure(ctx, p, r.Version, r.Platform)
	}))
	mux.HandleFunc("POST /v1/export", serveAdmin(a, func(ctx context.Context, r AdminExportRequest) (any, []any, error) {
		res, err := a.Export(ctx, r)
		return res, []any{"out", r.Out}, err
	}))
	mux.HandleFunc("POST /v1/import", serveAdmin(a, func(ctx context.Context, r AdminImportRequest) (any, []any, error) {
		res, err := a.Import(ctx, r)
		return res, []any{"in", r.In}, err
	}))
	a.moduleRoutes(mux) // adminmodules.go
	a.pruneRoutes(mux)  // adminprune.go
	return mux
}

func (a *Admin) serve(op func(context.Context, discovery.Provider, AdminRequest) (any, error)) http.HandlerFunc {
	return serveAdmin(a, func(ctx context.Context, req AdminRequest) (any, []any, error) {
		attrs := []any{"provider", req.Provider, "version", req.Version, "platform", req.Platform}
		p, err := parseAddress(req.Provider)
		if err != nil {
			return nil, attrs, err
		}
		res, err := op(ctx, p, req)
		return res, attrs, err
	})
}

// serveAdmin serves an admin operation whose request body is a Req; op
// returns the answer, and the request's attributes for the log.
func serveAdmin[Req any](a *Admin, op func(context.Context, Req) (any, []any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Req
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminRequest))
		if err == nil {
			if err = json.Unmarshal(body, &req); err != nil {
				err = badRequest("request body: %v", err)
			}
		} else {
			err = badRequest("request body: %v", err)
		}
		var res any
		var attrs []any
		if err == nil {
			res, attrs, err = op(r.Context(), req)
		}
		if err != nil {
			if r.Context().Err() != nil {
				err = &clientGoneError{err}
			}
			status := statusOf(err)
			level := slog.LevelWarn
			if status == StatusClientClosedRequest || status == http.StatusNotFound {
				level = slog.LevelInfo
			} else if status == http.StatusInternalServerError {
				level = slog.LevelError
			}
			a.log.Log(r.Context(), level, "admin request failed",
				append(append([]any{"path", r.URL.Path}, attrs...), "status", status, "error", err)...)
			writeJSON(w, status, AdminError{Error: err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, res)
	}
}

// AdminCallError is a failed admin API call as a client sees it.
type AdminCallError struct {
	Status int
	Msg    string
}

func (e *AdminCallError) Error() string { return e.Msg }

// DecodeAdminError turns a failed admin answer into an error.
func DecodeAdminError(status int, body []byte) error {
	var ae AdminError
	if json.Unmarshal(body, &ae) != nil || ae.Error == "" {
		return &AdminCallError{Status: status, Msg: fmt.Sprintf("admin API status %d: %q", status, body)}
	}
	return &AdminCallError{Status: status, Msg: ae.Error}
}
