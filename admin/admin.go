// Package admin is tfmirror's local admin API: what `tfmirror sync`,
// `export` and `import` ask of the engine, as Go methods (API) for a
// command that opened the engine itself, and as JSON over HTTP on a unix
// socket in the data directory (Handler, Listen) for one that reaches a
// running `tfmirror serve` (Client, Dial).
//
// It owns the admin operations, their wire format, the socket and its
// access control (the socket's file mode and the caller's uid) and the
// audit log of what each operation changed. It does not fetch, verify,
// store or prune anything itself (the engine, package mirror, airgap and
// retention do), and it maps errors to status codes through
// proxy/httperr, like the mirror's own front door (package proxy).
package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/airgap"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/cachecheck"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/mirror/notfound"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
	"github.com/tfmirror/tfmirror/v2/oci"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
	"github.com/tfmirror/tfmirror/v2/retention"
)

// Both doors go through the same methods, so a package is fetched and
// verified the same way whichever door it comes through, and exactly as
// for a client.

// Version is one version of a provider and the platforms its origin
// lists for it.
type Version struct {
	Version   string   `json:"version"`
	Platforms []string `json:"platforms"`
}

// Archive is the verified package of one platform of a version.
type Archive struct {
	Platform string `json:"platform"`
	Filename string `json:"filename"`
	SHA256   string `json:"sha256"`
	// Cached says the archive is in the cache; Size is then its size.
	Cached bool  `json:"cached"`
	Size   int64 `json:"size,omitempty"`
}

// Ensured is the result of making sure one archive is cached.
type Ensured struct {
	SHA256 string `json:"sha256"`
	// Bytes is the archive's size.
	Bytes int64 `json:"bytes"`
	// CachedAlready says the archive was in the cache before the call.
	CachedAlready bool `json:"cached_already"`
	// Source is the records.Source: hit, miss or coalesced.
	Source string `json:"source"`
}

// Request is the body of every admin API call; each uses the fields
// it needs.
type Request struct {
	Provider  string   `json:"provider"` // HOST/NAMESPACE/TYPE
	Version   string   `json:"version,omitempty"`
	Platform  string   `json:"platform,omitempty"`
	Platforms []string `json:"platforms,omitempty"`
}

// ErrorBody is the body of an admin API call that failed.
type ErrorBody struct {
	Error string `json:"error"`
}

// ExportRequest asks for an export (airgap.Export) to Out, an
// absolute path the serving process writes; empty lists select all.
type ExportRequest struct {
	Out       string   `json:"out"`
	Providers []string `json:"providers,omitempty"` // HOST/NAMESPACE/TYPE
	Versions  []string `json:"versions,omitempty"`
	Platforms []string `json:"platforms,omitempty"`
	// Format is what is written: FormatBundle (the default) or
	// FormatOCILayout (airgap.ExportOCILayout, unsigned).
	Format string `json:"format,omitempty"`
}

// The formats of an export.
const (
	FormatBundle    = "bundle"
	FormatOCILayout = "oci-layout"
)

// Exported is the result of an export: its summary and one line per
// version that failed.
type Exported struct {
	airgap.ExportSummary
	// Layout is the summary of an OCI layout export.
	Layout   *airgap.LayoutSummary `json:"layout,omitempty"`
	Failures []string              `json:"failures,omitempty"`
}

// OCILayout is what an OCI layout export needs: the OCI documents behind
// the package policy (*mirror/served.Packages, over the OCI side the OCI
// front door shares, so that both keep the same documents) and the
// repository names.
type OCILayout struct {
	Artifacts airgap.Artifacts
	Names     oci.Names
}

// ImportRequest asks for an import (airgap.Import) of In, an
// absolute path the serving process reads; Shown is In as the user named
// it, for messages.
type ImportRequest struct {
	In            string `json:"in"`
	Shown         string `json:"shown,omitempty"`
	AllowUnsigned bool   `json:"allow_unsigned,omitempty"`
}

// Imported is the result of an import: its summary and one line per
// version refused.
type Imported struct {
	airgap.ImportSummary
	Failures []string `json:"failures,omitempty"`
}

// Metrics receives what the admin API did. *metrics.Metrics implements it.
type Metrics interface {
	// Synced records a package asked for with its outcome (fetched,
	// cached, failed) and the bytes fetched for it.
	Synced(outcome string, fetchedBytes int64)
	// AirGap records what an export or import (op) did: packages by
	// outcome (exported or imported, present, failed) and the bytes
	// written or imported.
	AirGap(op string, packages map[string]int, bytes int64)
}

// Options configure an Admin.
type Options struct {
	// ScratchDir is where an import unpacks a tar file; default
	// os.TempDir(). tfmirror uses the data directory: it is where the
	// space is.
	ScratchDir string
	// MaxFileBytes bounds each file of an imported tar file; default 1 GiB.
	MaxFileBytes int64
	// ExportKey returns the key that signs an export's manifest; nil:
	// exports fail.
	ExportKey func() (*airgap.ExportKey, error)
	// ExportKeyFile is the file ExportKey reads the key from, for
	// `tfmirror export-key` to name.
	ExportKeyFile string
	// Trust is what an import trusts: the serving process's keys, never
	// a caller's.
	Trust airgap.Trust
	// TrustNow, when set, gives what an import trusts when it starts, in
	// place of Trust: the serving process's keys as its last reload read
	// them (a key removed from its file is no longer trusted).
	TrustNow func() airgap.Trust
	// OCILayout, when set, makes OCI layout exports possible; nil: they
	// fail.
	OCILayout *OCILayout
	// Reload reads the serving process's configuration again and puts it
	// in force (the same as on SIGHUP); nil: a reload is refused (a
	// command that opened the data directory itself serves nothing).
	Reload func(ctx context.Context) (Reloaded, error)
	// Releases is the CLI releases side, behind the package policy, that
	// sync's cli blocks fill (clireleases.go); nil: they are refused.
	Releases CLIReleases
	// CLIAirGap is the CLI releases side that exports carry (what its
	// policy lets be served) and imports fill; nil: exports carry no CLI
	// version and imports refuse those of their input.
	CLIAirGap airgap.CLISide
}

// Pruner prunes the engine's cache (PruneRequest). *retention.Retainer
// implements it.
type Pruner interface {
	Prune(ctx context.Context, req retention.PruneRequest) ([]retention.Removal, error)
}

// Packages is what sync and the bundle export ask of the engine, behind
// the package policy (*mirror/served.Packages): the versions and packages
// it may serve, the archives it caches, and whether a version the cache
// holds may be served (airgap.Served).
type Packages interface {
	airgap.Served
	Versions(ctx context.Context, p addrs.Provider) (*records.VersionList, mirror.ListState, error)
	Package(ctx context.Context, p addrs.Provider, v versions.Version, platforms []addrs.Platform) (*mirror.Package, error)
	EnsureArchive(ctx context.Context, p addrs.Provider, v versions.Version, pl addrs.Platform) (records.Source, error)
	CachedSize(sha string) (int64, bool)
	ModuleVersions(ctx context.Context, m addrs.Module) (*records.ModuleVersionList, modules.ListState, error)
	OpenModule(ctx context.Context, m addrs.Module, version versions.Version) (*modules.Package, error)
}

// Engine is what the admin operations use of the engine: what export and
// import use (airgap.Engine), the check of the whole cache, what it
// withholds, and what it knows of a version's release (policy.go).
// *mirror.Engine implements it.
type Engine interface {
	airgap.Engine
	CacheChecker() *cachecheck.Checker
	Withheld() []unsigned.Version
	Inventory() *mirror.Inventory
	// NotFound is what the engine remembers of its origins' not-found
	// answers, which a sync forgets for what it syncs.
	NotFound() *notfound.Memory
}

var _ Engine = (*mirror.Engine)(nil)

// API runs admin operations on an engine.
type API struct {
	engine  Engine
	pkgs    Packages // the engine behind the package policy: what sync reaches packages through
	pruner  Pruner
	log     *slog.Logger
	metrics Metrics
	opts    Options
	uid     int   // the user the process runs as, who may call (see peer.go)
	drain   drain // a shutdown's (Server.Drain)
}

// New returns the admin operations of engine, reaching packages through
// pkgs (the engine behind its package policy), whose cache pruner prunes
// (all required). A nil logger discards; a nil metrics records nothing.
func New(engine Engine, pkgs Packages, pruner Pruner, logger *slog.Logger, met Metrics, opts Options) (*API, error) {
	if isNil(engine) || pkgs == nil || pruner == nil {
		return nil, errors.New("admin: an engine, its packages behind the policy and its pruner are required")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &API{engine: engine, pkgs: pkgs, pruner: pruner, log: logger, metrics: met, opts: opts, uid: os.Getuid()}, nil
}

// isNil reports whether v is nil or a nil pointer in an interface.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// Export exports the cached packages req selects to req.Out through
// airgap.Export.
func (a *API) Export(ctx context.Context, req ExportRequest) (Exported, error) {
	var res Exported
	if !filepath.IsAbs(req.Out) {
		return res, httperr.BadRequest("out %q: want an absolute path", req.Out)
	}
	var sel airgap.Selection
	for _, s := range req.Providers {
		p, err := addrs.ParseProvider(s)
		if err != nil {
			return res, httperr.BadRequest("%v", err)
		}
		sel.Providers = append(sel.Providers, p)
	}
	for _, s := range req.Versions {
		v, err := addrs.ParseSemver(s)
		if err != nil {
			return res, httperr.BadRequest("version %q: %v", s, err)
		}
		sel.Versions = append(sel.Versions, v.String())
	}
	for _, s := range req.Platforms {
		if _, err := addrs.ParsePlatform(s); err != nil {
			return res, httperr.BadRequest("%v", err)
		}
		sel.Platforms = append(sel.Platforms, s)
	}
	switch req.Format {
	case "", FormatBundle:
	case FormatOCILayout:
		res, err := a.exportOCILayout(ctx, req, sel)
		return res, selectionError(err)
	default:
		return res, httperr.BadRequest("format %q: want %s or %s", req.Format, FormatBundle, FormatOCILayout)
	}
	if a.opts.ExportKey == nil {
		return res, fmt.Errorf("no export key is configured to sign the export's manifest")
	}
	key, err := a.opts.ExportKey()
	if err != nil {
		return res, fmt.Errorf("export key: %w", err)
	}
	var failures reported
	sum, err := airgap.Export(ctx, a.engine, a.pkgs, a.opts.CLIAirGap, sel, req.Out, key, failures.add)
	res.ExportSummary, res.Failures = sum, failures.list()
	if a.metrics != nil {
		// Every package it carries counts, as the failed versions of
		// providers, modules and CLI releases do, and as an OCI layout
		// export counts module zips.
		a.metrics.AirGap("export", map[string]int{"exported": sum.Written + sum.Modules + sum.CLIArchives, "present": sum.Present + sum.ModulesPresent + sum.CLIPresent, "failed": sum.Failed}, sum.Bytes+sum.ModuleBytes+sum.CLIBytes)
	}
	return res, selectionError(err)
}

// selectionError is err, an export's, as a 404 when the selection named
// what the cache does not hold (airgap.UnmatchedSelectionError): the
// caller's to fix, not the mirror's fault.
func selectionError(err error) error {
	if unmatched := (*airgap.UnmatchedSelectionError)(nil); errors.As(err, &unmatched) {
		return &httperr.RequestError{Status: http.StatusNotFound, Msg: err.Error()}
	}
	return err
}

// exportOCILayout is Export of FormatOCILayout.
func (a *API) exportOCILayout(ctx context.Context, req ExportRequest, sel airgap.Selection) (Exported, error) {
	var res Exported
	if a.opts.OCILayout == nil {
		return res, errors.New("OCI layout exports are not configured")
	}
	var failures reported
	sum, err := airgap.ExportOCILayout(ctx, a.engine, a.opts.OCILayout.Artifacts, a.opts.OCILayout.Names, sel, req.Out,
		failures.add)
	res.Layout, res.Failures = &sum, failures.list()
	res.Failed = sum.Failed
	if a.metrics != nil {
		a.metrics.AirGap("export", map[string]int{"exported": sum.Packages, "present": sum.PackagesPresent, "failed": sum.Failed}, sum.PackageBytes)
	}
	return res, err
}

// reported collects the lines an export or import reports (a version that
// failed, a refusal), each of which the answer lists and the log holds:
// the first maxListedFailures of them, and how many more there were. A
// bundle or output directory, a stranger's, may hold as many failures as
// it has entries.
type reported struct {
	lines []string
	more  int
}

func (r *reported) add(line string) {
	if len(r.lines) < maxListedFailures {
		r.lines = append(r.lines, line)
		return
	}
	r.more++
}

// list is the lines kept, with one saying how many more were not.
func (r *reported) list() []string {
	if r.more == 0 {
		return r.lines
	}
	return append(r.lines, fmt.Sprintf("... and %d more not listed (the first %d are)", r.more, maxListedFailures))
}

// Import imports req.In into the cache through airgap.Import.
func (a *API) Import(ctx context.Context, req ImportRequest) (Imported, error) {
	var res Imported
	if !filepath.IsAbs(req.In) {
		return res, httperr.BadRequest("in %q: want an absolute path", req.In)
	}
	trust := a.opts.Trust
	if a.opts.TrustNow != nil {
		trust = a.opts.TrustNow()
	}
	var failures reported
	sum, err := airgap.Import(ctx, a.engine, req.In, airgap.ImportOptions{
		Trust:         trust,
		AllowUnsigned: req.AllowUnsigned,
		Shown:         req.Shown,
		ScratchDir:    a.opts.ScratchDir,
		MaxFileBytes:  a.opts.MaxFileBytes,
		CLI:           a.opts.CLIAirGap,
	}, failures.add)
	res.ImportSummary, res.Failures = sum, failures.list()
	if a.metrics != nil {
		a.metrics.AirGap("import", map[string]int{"imported": sum.Imported + sum.Modules + sum.CLIArchives, "present": sum.Present + sum.ModulesPresent + sum.CLIPresent, "failed": sum.Failed}, sum.Bytes+sum.ModuleBytes+sum.CLIBytes)
	}
	return res, err
}

// Versions returns p's versions, oldest first as the origin lists them.
// A sync asks it first for each provider: what the origin was last heard
// to lack of p is forgotten, so that the origin is asked (a version
// published since is synced at once).
func (a *API) Versions(ctx context.Context, p addrs.Provider) ([]Version, error) {
	a.engine.NotFound().ForgetProvider(p)
	list, _, err := a.pkgs.Versions(ctx, p)
	if err != nil {
		return nil, err
	}
	out := make([]Version, 0, len(list.Versions))
	for _, e := range list.Versions {
		out = append(out, Version{Version: e.Version, Platforms: slices.Clone(e.Platforms)})
	}
	return out, nil
}

// Package returns the verified packages of version of p for platforms
// (fetching and verifying their metadata, not the archives), and whether
// each archive is cached. Empty platforms means every platform of the
// version that the engine serves. Platforms without a package are left
// out.
func (a *API) Package(ctx context.Context, p addrs.Provider, version string, platforms []string) ([]Archive, error) {
	v, err := addrs.ParseSemver(version)
	if err != nil {
		return nil, httperr.BadRequest("version %q: %v", version, err)
	}
	var pls []addrs.Platform // nil: all
	for _, s := range platforms {
		pl, err := addrs.ParsePlatform(s)
		if err != nil {
			return nil, httperr.BadRequest("%v", err)
		}
		pls = append(pls, pl)
	}
	pkg, err := a.pkgs.Package(ctx, p, v, pls)
	if err == nil {
		err = pkg.Unasked // sync holds the metadata of every platform
	}
	if err != nil {
		return nil, err
	}
	out := make([]Archive, 0, len(pkg.Archives))
	for _, arc := range pkg.Archives {
		aa := Archive{Platform: arc.Platform, Filename: arc.Filename, SHA256: arc.SHA256}
		aa.Size, aa.Cached = a.pkgs.CachedSize(arc.SHA256)
		out = append(out, aa)
	}
	return out, nil
}

// Ensure makes sure the archive of version of p for platform is cached:
// through the engine's EnsureArchive, fetched and verified exactly as for
// a client.
func (a *API) Ensure(ctx context.Context, p addrs.Provider, version, platform string) (Ensured, error) {
	res, err := a.ensure(ctx, p, version, platform)
	a.countSynced(ctx, err, res.CachedAlready, res.Bytes)
	return res, err
}

// countSynced counts one archive sync asked for: failed (err), found
// cached, or fetched with its bytes. One whose caller went away (ctx
// done: the sync interrupted) before it ended is not counted: it did not
// fail (the fetch goes on, once begun, and is cached for the next sync), and a
// failure counted would be one an operator's alert pages for.
func (a *API) countSynced(ctx context.Context, err error, cached bool, fetched int64) {
	if a.metrics == nil {
		return
	}
	switch {
	case err != nil && ctx.Err() != nil:
	case err != nil:
		a.metrics.Synced("failed", 0)
	case cached:
		a.metrics.Synced("cached", 0)
	default:
		a.metrics.Synced("fetched", fetched)
	}
}

func (a *API) ensure(ctx context.Context, p addrs.Provider, version, platform string) (Ensured, error) {
	v, err := addrs.ParseSemver(version)
	if err != nil {
		return Ensured{}, httperr.BadRequest("version %q: %v", version, err)
	}
	pl, err := addrs.ParsePlatform(platform)
	if err != nil {
		return Ensured{}, httperr.BadRequest("%v", err)
	}
	pkg, err := a.pkgs.Package(ctx, p, v, []addrs.Platform{pl})
	if err != nil {
		return Ensured{}, err
	}
	if len(pkg.Archives) == 0 {
		return Ensured{}, fmt.Errorf("%w: %s %s has no package for %s", records.ErrPlatformNotFound, p, v, pl)
	}
	sha := pkg.Archives[0].SHA256
	src, err := a.pkgs.EnsureArchive(ctx, p, v, pl)
	if err != nil {
		return Ensured{}, err
	}
	size, ok := a.pkgs.CachedSize(sha)
	if !ok {
		return Ensured{}, fmt.Errorf("archive %s was cached and is gone again (evicted: is --cache-max-bytes too small?)", pkg.Archives[0].Filename)
	}
	return Ensured{SHA256: sha, Bytes: size, CachedAlready: src == records.Hit, Source: src.String()}, nil
}
