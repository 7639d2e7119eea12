package modules

// Registry modules: the second kind of thing the engine mirrors, through
// the same cache, blob store, detached work and limits as provider
// archives.
//
// A module version has one record (records.ModuleRecord, key
// module/HOST/NS/NAME/SYSTEM/VERSION) written when its download location
// is first asked for, and completed with the package's sha256 once the
// package has been fetched from its source host and normalized into one
// tar.gz (package modsource), stored as a blob. The record is never
// replaced: the blob may be evicted, and a refetch must then give the same
// bytes, or it is refused (a tag moved upstream does not change what the
// mirror serves).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	svchost "github.com/hashicorp/terraform-svchost"
	"golang.org/x/sync/singleflight"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/memo"
	"github.com/tfmirror/tfmirror/v2/internal/redact"
	"github.com/tfmirror/tfmirror/v2/internal/safetree"
	"github.com/tfmirror/tfmirror/v2/internal/scratch"
	"github.com/tfmirror/tfmirror/v2/internal/workgroup"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
	"github.com/tfmirror/tfmirror/v2/mirror/notfound"
	"github.com/tfmirror/tfmirror/v2/mirror/originguard"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/stored"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// Modules is the engine's registry-module side: module version lists,
// records and packages, fetched from their source hosts through the
// machinery the engine shares with providers: the engine's lifetime
// (detached work and its coalescing, the notifier, the import lock), the
// shared tier, the hosts and the package policy (Parts).
// mirror.Engine.Modules returns the engine's; its methods are safe for
// concurrent use.
type Modules struct {
	life  *lifetime.Lifetime // detached work, coalescing, the import lock, the notifier
	recs  Records            // the module records and packages stored, and beyond the cache
	hosts *originguard.Hosts
	gate  *gate.Gate
	// notFound are the origins' not-found answers remembered beneath
	// origin (nil: none), which an import of a module forgets.
	notFound *notfound.Memory
	cfg      Config
	origin   Origin
	store    Store
	log      *slog.Logger
	metrics  Metrics
	pkgs     singleflight.Group // package fetches, by record key
	slots    chan struct{}      // one for each package fetch from a source host under way (Config.MaxFetches)
	// checked are the stored packages held to today's rules
	// (checkPackage), by sha256: nil for one that passed, else why it
	// was refused.
	checked *memo.Memo[string, error]
	trees   *packageTrees // what packages hold (records.ModuleRecord.Tree)
	refused *refusals     // what the mirror refused of a source a moment ago
}

// Parts are the engine's components the module side takes; all but
// NotFound are required.
type Parts struct {
	Life    *lifetime.Lifetime // detached work and its coalescing, the import lock, the notifier
	Records Records            // the module records and packages stored, and beyond the cache
	Hosts   *originguard.Hosts // the allowed origins and the local-only hosts
	Gate    *gate.Gate         // the package policy on module versions, and the listings that date them
	// NotFound are the origins' not-found answers remembered (nil: none
	// are): an import of a module forgets what is remembered of it.
	NotFound *notfound.Memory
}

// Records is where the module side reads and writes its records, in one
// line of calls (mirror/stored.Source), and what it asks of the store
// beyond the cache for module packages: the engine's stored records
// (mirror/stored.Records, which find nothing beyond the cache), or the
// tier shared with other replicas that the engine composes over them.
type Records interface {
	stored.Source
	// ModuleRecord returns the module record under key: the cache's
	// (records.Hit), else a complete one from beyond it
	// (records.Shared, stored in the cache from then on); when none has
	// one, the cache's error.
	ModuleRecord(ctx context.Context, key string) (*records.ModuleRecord, records.Source, error)
	// FetchModule is the fetch of module m's version, recorded as rec
	// under key, with the store beyond the cache in front of fetch (the
	// fetch from the source host): the package from there when it has it
	// (at most limit bytes), else through fetch (and then ShareModule).
	FetchModule(ctx context.Context, m addrs.Module, key string, rec records.ModuleRecord, limit int64,
		fetch func(context.Context, records.ModuleRecord) (*records.ModuleRecord, error)) (*records.ModuleRecord, error)
	// ShareModule offers a fetched module package and its record, stored
	// in the cache.
	ShareModule(ctx context.Context, key string, rec *records.ModuleRecord, pkg io.ReadSeeker)
	// InstallableModules hands add, in turn, the versions of m's list
	// beyond the cache that have is false for (asked again after each
	// add) and whose record and package are there (a sealed mirror's
	// list).
	InstallableModules(ctx context.Context, m addrs.Module, have func(versions.Version) bool, add func(string))
}

// Store is what Modules needs of the cache. *cache.Store implements it.
type Store interface {
	PutMeta(key string, v any) error
	GetMeta(key string, v any) (time.Time, error)
	StatBlob(sha string) (cache.BlobInfo, error)
	OpenBlob(sha string) (cache.BlobReader, error)
	NewBlobWriter(expectedSHA string) (cache.BlobWriter, error)
	ScanMeta(prefix string, fn func(key string, storedAt time.Time, raw json.RawMessage) error) error
	ScanMetaAfter(prefix, after string, fn func(key string, storedAt time.Time, raw json.RawMessage) error) error
}

// Metrics receives what Modules observes (mirror.Metrics).
type Metrics interface {
	CacheLookup(kind string, hit bool)
	StaleServed(kind string)
	Coalesced(kind string)
	VerificationFailed(reason string)
	CacheWriteFailed()
	// ModuleFetch records one fetch of a module package from its source
	// host: the source kind (git, archive), the outcome (success, error,
	// too_large, changed, timeout), the bytes of the stored package.
	ModuleFetch(kind, outcome string, bytes int64, d time.Duration)
	// ArchiveFetchWaiting records a package fetch waiting for one of the
	// fetch slots (Config.MaxFetches); done ends the wait.
	ArchiveFetchWaiting() (done func())
}

// Config configures Modules: the engine's (mirror.Config), its defaults
// filled in. Every field but Credentials is required.
type Config struct {
	Offline     bool
	Now         func() time.Time
	VersionsTTL time.Duration
	// StaleAfter is how long a caller waits for a version list's refresh
	// when the cache holds one: then the cached list is served, stale,
	// and the refresh goes on (mirror.Config.StaleAfter).
	StaleAfter time.Duration
	// Timeout bounds one module package fetch (mirror.Config.ModuleTimeout).
	Timeout time.Duration
	// Limits bound one module package (mirror.Config.ModuleLimits).
	Limits modsource.Limits
	// MaxFetches bounds the package fetches from source hosts at once
	// (mirror.Config.MaxArchiveDownloads, in a pool apart from the
	// provider archives'): one beyond them waits for one to end, within
	// its Timeout.
	MaxFetches int
	ScratchDir string
	// Credentials: mirror.Config.ModuleSourceCredentials; nil for none.
	Credentials SourceCredentials
	Logger      *slog.Logger
}

// ListState says where a module version list came from.
type ListState struct {
	// Stale says the cached list was served because the refresh failed.
	Stale bool
	// Fetched says the list was fetched from the origin for this call.
	Fetched bool
	// StoredAt is when the list was fetched from the origin.
	StoredAt time.Time
}

// New returns the module side of an engine, on origin and store.
func New(cfg Config, parts Parts, origin Origin, store Store, metrics Metrics) (*Modules, error) {
	if parts.Life == nil || parts.Records == nil || parts.Hosts == nil || parts.Gate == nil || origin == nil || store == nil || metrics == nil || cfg.Now == nil || cfg.Logger == nil {
		return nil, errors.New("modules: the engine's parts, an origin, a store, metrics, a clock and a logger are required")
	}
	if cfg.Timeout <= 0 || cfg.VersionsTTL <= 0 || cfg.MaxFetches <= 0 {
		return nil, errors.New("modules: a fetch timeout, a version list TTL and a bound on fetches at once are required")
	}
	return &Modules{life: parts.Life, recs: parts.Records, hosts: parts.Hosts, gate: parts.Gate, notFound: parts.NotFound, cfg: cfg, origin: origin, store: store, log: cfg.Logger, metrics: metrics,
		slots:   make(chan struct{}, cfg.MaxFetches),
		checked: memo.New[string, error](maxChecked), trees: &packageTrees{store: store, life: parts.Life, log: cfg.Logger, metrics: metrics}, refused: newRefusals(cfg.Now, parts.NotFound)}, nil
}

// Origin is what the engine needs for registry modules from origin
// registries and source hosts: the module side of mirror.Origin. Offline,
// module calls that need an origin fail with records.ErrOffline.
type Origin interface {
	ModuleVersions(ctx context.Context, m addrs.Module) ([]string, error)
	ModuleLocation(ctx context.Context, m addrs.Module, version string) (discovery.ModuleDownload, error)
	OpenSource(ctx context.Context, origin svchost.Hostname, rawURL string) (io.ReadCloser, int64, error)
	SourceHTTPClient(origin svchost.Hostname) *http.Client
}

// SourceCredentials give the credential for a module source host
// that a module of an origin may use. A credential is tied to origins by
// the operator: a module of an origin it is not tied to is fetched
// anonymously, so that an origin cannot have the mirror fetch, and hand
// out, a private repository the mirror can read (a confused deputy).
type SourceCredentials interface {
	// SourceCredential returns the credential for the source host (as a
	// URL spells it: lowercase, with its port when not 443) that modules
	// of origin may use, false for none.
	SourceCredential(origin svchost.Hostname, host string) (discovery.SourceCredential, bool)
}

// ErrChanged matches a module package whose refetch (after its
// blob was evicted) does not give the bytes first stored: the source
// moved the tag, or rewrote the archive. It is an integrity error.
var ErrChanged = errors.New("module package changed at its source since it was first mirrored")

// CheckModuleOrigin fails with discovery.ErrHostNotAllowed for a module of a host
// the engine does not serve: neither an allowed origin nor a local-only
// host (one that Import or ImportModule loaded packages of), whose
// modules are served from the cache only. The package policy's layer
// (mirror/served) asks it, with the address rules, before any call
// reaches the module API, whose methods do not ask it again; the origin
// side refuses such a host on its own (the origin client's allowed
// origins), a local-only host's modules are listed from the cache and
// never fetched (moduleVersions, ModuleLocation), and a sealed mirror
// has no origin (moduleOrigin).
func (s *Modules) CheckModuleOrigin(m addrs.Module) error {
	if !s.hosts.Allowed(m.Hostname) && !s.hosts.Local(m.Hostname) {
		return fmt.Errorf("%w: %s", discovery.ErrHostNotAllowed, m.Hostname)
	}
	return nil
}

// moduleOrigin returns the origin for modules, or an error saying why
// there is none.
func (s *Modules) moduleOrigin(what string) (Origin, error) {
	if s.cfg.Offline {
		return nil, fmt.Errorf("%w: %s", records.ErrOffline, what)
	}
	return s.origin, nil
}

// ModuleVersions returns m's version list: from the cache while it is
// younger than Config.VersionsTTL, from the origin otherwise, and the
// cached list, marked stale, when the origin fails for any reason but
// saying the module does not exist. A sealed mirror (Config.Offline)
// lists only the versions whose package is cached.
func (s *Modules) ModuleVersions(ctx context.Context, m addrs.Module) (*records.ModuleVersionList, ListState, error) {
	list, st, err := s.moduleVersions(ctx, m, false)
	if err != nil {
		return nil, ListState{}, err
	}
	list, _, err = s.gate.FilterModules(m, list)
	if err != nil {
		return nil, ListState{}, err
	}
	return list, st, nil
}

// moduleVersions is ModuleVersions before the package policy; force
// fetches a cached list again however fresh it is.
func (s *Modules) moduleVersions(ctx context.Context, m addrs.Module, force bool) (*records.ModuleVersionList, ListState, error) {
	if s.cfg.Offline || s.hosts.Local(m.Hostname) {
		return s.sealedModuleVersions(ctx, m)
	}
	key := records.ModuleVersionsKey(m)
	var cached records.ModuleVersionList
	storedAt, _, err := s.recs.Get(ctx, key, &cached)
	haveCached := err == nil && records.KnownSchema(cached.Schema)
	if err != nil && !errors.Is(err, cache.ErrNotFound) {
		s.log.Warn("reading cached module version list", "module", m.String(), "error", err)
	}
	if haveCached && !force && records.Fresh(s.cfg.Now(), storedAt, s.cfg.VersionsTTL) {
		s.metrics.CacheLookup("module_versions", true)
		return &cached, ListState{StoredAt: storedAt}, nil
	}
	s.metrics.CacheLookup("module_versions", false)
	var wait time.Duration // with nothing to serve instead, as long as ctx lets it
	var seen time.Time     // when the list read was stored; zero for none
	if haveCached {
		wait, seen = s.cfg.StaleAfter, storedAt
	}
	res, err := s.life.CoalesceWithin(ctx, wait, "module_versions", originCoalesceKey(key, m), func(ctx context.Context) (any, error) {
		// Again: a listing that ended just before this one began may
		// have stored the origin's answer since.
		if l, ok := s.listedSince(ctx, key, seen); ok {
			return l, nil
		}
		mo, err := s.moduleOrigin("module versions of " + m.String())
		if err != nil {
			return nil, err
		}
		vs, err := mo.ModuleVersions(ctx, m)
		if err != nil {
			return nil, err
		}
		var skipped []string
		vs = records.ModuleVersionsServed(vs, func(raw string, _ error) {
			if len(skipped) < 3 {
				if len(raw) > 64 {
					raw = raw[:64] + "..."
				}
				skipped = append(skipped, raw)
			}
		})
		if len(skipped) > 0 { // one line per listing, however many
			s.log.Warn("origin lists strings that are not module versions; left out of the list", "module", m.String(), "such as", skipped)
		}
		prev, prevDates, prevAt := s.previousListing(ctx, m)
		list := &records.ModuleVersionList{Schema: records.Schema, Versions: vs, ListedAt: s.cfg.Now().UTC(), Lacked: records.Lacking(prev, vs)}
		s.gate.NoteListing(ctx, "module", m.String(), key, prev, prevDates, prevAt, vs)
		list.Dates = s.gate.ListingDates("module", m.String(), list.Named())
		if err := s.recs.Put(key, list); err != nil {
			s.metrics.CacheWriteFailed()
			s.log.Log(context.Background(), cache.WriteFailureLevel(err), "storing module version list", "module", m.String(), "error", err)
		}
		return list, nil
	})
	if err == nil {
		return res.(*records.ModuleVersionList), ListState{Fetched: true, StoredAt: s.cfg.Now()}, nil
	}
	if haveCached && !errors.Is(err, discovery.ErrNotFound) && ctx.Err() == nil {
		s.metrics.StaleServed("module_versions")
		s.life.LogStale(s.log, lifetime.StaleMessage(err, "module version list"), "module", m.String(), "stored_at", storedAt, "error", err)
		return &cached, ListState{Stale: true, StoredAt: storedAt}, nil
	}
	return nil, ListState{}, err
}

// listedSince returns the module version list under key when it was
// stored after seen, when the caller read the list it found expired (zero
// when it found none), and is fresh: the origin's answer to a listing
// taken after the caller's read, which answers the caller's.
func (s *Modules) listedSince(ctx context.Context, key string, seen time.Time) (*records.ModuleVersionList, bool) {
	var l records.ModuleVersionList
	at, _, err := s.recs.Get(ctx, key, &l)
	if err != nil || !records.KnownSchema(l.Schema) || !at.After(seen) || !records.Fresh(s.cfg.Now(), at, s.cfg.VersionsTTL) {
		return nil, false
	}
	return &l, true
}

// sealedModuleVersions lists the versions of m whose package is cached
// and passes today's rules (checkStoredPackage: a version whose package
// is refused is served by no door, so it is not offered), or held by the
// shared tier.
func (s *Modules) sealedModuleVersions(ctx context.Context, m addrs.Module) (*records.ModuleVersionList, ListState, error) {
	list := &records.ModuleVersionList{Schema: records.Schema, Versions: []string{}}
	var held []records.ModuleRecord
	err := s.store.ScanMeta(records.ModuleRecordPrefix(m), func(_ string, _ time.Time, raw json.RawMessage) error {
		var rec records.ModuleRecord
		if json.Unmarshal(raw, &rec) != nil || rec.SHA256 == "" {
			return nil
		}
		if _, err := s.store.StatBlob(rec.SHA256); err == nil {
			held = append(held, rec)
		}
		return nil
	})
	if err != nil {
		return nil, ListState{}, err
	}
	for _, rec := range held {
		if errors.Is(s.checkStoredPackage(ctx, rec.SHA256), ErrPackageRefused) {
			continue
		}
		list.Versions = append(list.Versions, rec.Version)
	}
	s.recs.InstallableModules(ctx, m, func(v versions.Version) bool {
		_, listed := list.OriginSpelling(v)
		return listed
	}, func(v string) { list.Versions = append(list.Versions, v) })
	if len(list.Versions) == 0 {
		if !s.cfg.Offline {
			return nil, ListState{}, fmt.Errorf("%w: no version of module %s of the local-only host %s is cached", discovery.ErrNotFound, m, m.Hostname)
		}
		return nil, ListState{}, fmt.Errorf("%w: no cached version of module %s", records.ErrOffline, m)
	}
	return list, ListState{}, nil
}

// ModuleLocation returns the record of version of m, asking the origin
// for its download location when the engine has none yet (a record,
// once written, is kept), in the origin's spelling of the version (its
// version list's). Locations this mirror cannot fetch fail with a
// *modsource.UnsupportedError. Errors: discovery.ErrHostNotAllowed (the
// origin client's, for a host not among its allowed origins), records.ErrOffline,
// discovery.ErrNotFound and origin errors.
func (s *Modules) ModuleLocation(ctx context.Context, m addrs.Module, version versions.Version) (*records.ModuleRecord, error) {
	if err := s.checkPolicy(ctx, m, version); err != nil {
		return nil, err
	}
	key := records.ModuleRecordKey(m, version)
	rec, src, err := s.recs.ModuleRecord(ctx, key)
	if err == nil && src == records.Hit {
		s.metrics.CacheLookup("module_location", true)
		return rec, nil
	} else if errors.Is(err, records.ErrModuleRecordRefused) {
		if err := s.refusedRecord(ctx, m, version, key, err); err != nil {
			return nil, err
		}
	} else if err != nil && !errors.Is(err, cache.ErrNotFound) {
		s.log.Warn("reading module record", "module", m.String(), "version", version, "error", err)
	}
	s.metrics.CacheLookup("module_location", false)
	if err == nil {
		return rec, nil // another replica's
	}
	if s.hosts.Local(m.Hostname) {
		return nil, fmt.Errorf("%w: module %s %s (the host is local-only: its modules are imported, never fetched)", discovery.ErrNotFound, m, version)
	}
	res, err := s.life.Coalesce(ctx, "module_location", originCoalesceKey(key, m), func(ctx context.Context) (any, error) {
		mo, err := s.moduleOrigin(fmt.Sprintf("module %s %s is not cached", m, version))
		if err != nil {
			return nil, err
		}
		// A caller that found none just before another's ask (and its
		// package's fetch) ended takes the record that ask stored: asked
		// again, the origin's answer would be written over the record
		// completed with its package's sha256.
		if rec, src, err := s.recs.ModuleRecord(ctx, key); err == nil && src == records.Hit {
			return rec, nil
		}
		found := s.storedRecord(key) // none, or one today's rules refuse
		originVersion, err := s.originModuleVersion(ctx, m, version)
		if err != nil {
			return nil, err
		}
		dl, err := mo.ModuleLocation(ctx, m, originVersion)
		if err != nil {
			return nil, err
		}
		addr, err := records.ParseLocation(dl.Location, dl.Direct)
		if err != nil {
			return nil, fmt.Errorf("module %s %s: %w", m, version, err)
		}
		rec := &records.ModuleRecord{Schema: records.Schema, Module: m.String(), Version: originVersion,
			Kind: addr.Kind, Package: addr.Package(), Subdir: addr.Subdir}
		rec.SetDownload(dl.Location, dl.Direct, dl.RegistryCredentials)
		rec.RegistryAnswered = dl.RegistryCredentials // discovery checked its host
		// In turn with ImportModule: a record stored while the origin
		// was asked (an import's, whose package may not be fetched
		// again) is kept, not written over.
		s.life.Imports().Lock()
		defer s.life.Imports().Unlock()
		if now := s.storedRecord(key); !bytes.Equal(now, found) {
			var meanwhile records.ModuleRecord
			if json.Unmarshal(now, &meanwhile) == nil && records.KnownSchema(meanwhile.Schema) {
				return &meanwhile, nil
			}
		}
		if err := s.store.PutMeta(key, rec); err != nil {
			s.metrics.CacheWriteFailed()
			s.log.Log(context.Background(), cache.WriteFailureLevel(err), "storing module record", "module", m.String(), "version", version, "error", err)
		}
		return rec, nil
	})
	if err != nil {
		return nil, err
	}
	return res.(*records.ModuleRecord), nil
}

// originCoalesceKey is the key under which requests to the origin for m
// (stored under key) share one request: the origin is asked in the
// client's spelling of the namespace and name, and a registry that
// matches them with their case may answer one spelling and not another,
// so only requests in one spelling share an answer.
func originCoalesceKey(key string, m addrs.Module) string {
	p := m.OriginPath()
	return key + "\x00" + p[0] + "/" + p[1]
}

// storedRecord is the document the cache holds under key as stored, nil
// for none.
func (s *Modules) storedRecord(key string) json.RawMessage {
	var raw json.RawMessage
	if _, err := s.store.GetMeta(key, &raw); err != nil {
		return nil
	}
	return raw
}

// refusedRecord decides on a stored record of version of m that today's
// rules refuse (records.ErrModuleRecordRefused, refused): nil when it is
// to be made again from the origin (a record fetched from there, the
// origin reachable), which the caller then asks as it asks for a record
// it does not have (the new one replaces it); else refused, and the
// record is kept: an import, a local module or a sealed mirror's record
// cannot be fetched again.
func (s *Modules) refusedRecord(ctx context.Context, m addrs.Module, version versions.Version, key string, refused error) error {
	s.metrics.VerificationFailed(string(verify.ReasonBadArchive))
	var stale records.ModuleRecord
	_, _ = s.store.GetMeta(key, &stale) // decoded whatever the rules say
	if !s.fetchable(m, stale) {
		s.log.Error("stored module record refused by the rules in force; kept, not served: import the version again, or remove it and fetch it from its origin",
			"module", m.String(), "version", version, "provenance", stale.Provenance, "error", refused)
		return refused
	}
	s.log.Warn("stored module record refused by the rules in force; asking the origin for the version's location again",
		"module", m.String(), "version", version, "error", refused)
	return nil
}

// fetchable says rec, a record of a version of m, can be made again from
// its origin: one fetched from there, the origin reachable. An import, a
// local module and a sealed mirror's records cannot.
func (s *Modules) fetchable(m addrs.Module, rec records.ModuleRecord) bool {
	return rec.Provenance == records.ProvenanceOrigin && rec.Location != "" && !s.cfg.Offline && !s.hosts.Local(m.Hostname)
}

// ErrPackageRefused matches a stored module package that today's rules
// refuse (modsource.CheckPackageLinks): one kept by an earlier release,
// copied from the shared store or imported before a rule was added.
var ErrPackageRefused = errors.New("stored module package refused by the rules in force")

// maxChecked bounds the packages remembered as held to today's rules.
const maxChecked = 4096

// checkStoredPackage is checkPackage for the stored package sha, opened
// only when its verdict is not remembered (a zip served is judged by its
// package on every request): nil when the cache does not hold it.
func (s *Modules) checkStoredPackage(ctx context.Context, sha string) error {
	if refused, _, ok := s.checked.Get(sha); ok {
		return refused
	}
	b, ok := s.openBlob(sha)
	if !ok {
		return nil
	}
	defer b.Close()
	return s.checkPackage(ctx, sha, b.blob)
}

// checkPackage holds the stored package sha, opened as blob, to the rules
// a package fetched today is made by (modsource.CheckPackageLinks: its
// names and its links), once per package and process: every package
// opened from the cache passes it before it is served (openModuleBlob),
// the registry door's, the zips' and the exports' alike. It leaves blob
// at its start; a refusal is counted in the verification failures
// metric once per package and process. Errors: a *verify.Error (bad_archive) matching
// ErrPackageRefused; the blob's read errors.
func (s *Modules) checkPackage(ctx context.Context, sha string, blob io.ReadSeeker) error {
	if refused, _, ok := s.checked.Get(sha); ok {
		return refused
	}
	gen := s.checked.Generation()
	// No limits: it was within those of its day, and is read, not kept.
	err := modsource.CheckPackageLinks(ctx, blob, modsource.Limits{})
	if _, serr := blob.Seek(0, io.SeekStart); err == nil {
		err = serr
	}
	switch {
	case err == nil:
		s.checked.Put(sha, gen, nil)
		return nil
	case errors.Is(err, safetree.ErrUnsafe):
		s.metrics.VerificationFailed(string(verify.ReasonBadArchive))
		refused := &verify.Error{Reason: verify.ReasonBadArchive, Err: ErrPackageRefused, Detail: fmt.Sprintf("the cached module package %s: %v", sha, err)}
		s.checked.Put(sha, gen, refused) // the bytes of a sha256 do not change
		return refused
	}
	return fmt.Errorf("reading the cached module package %s: %w", sha, err)
}

// checkPolicy fails with the package policy's error when it holds
// version of m back: asked by every answer that serves a version (its
// location, package, zip, manifest), whatever the cache holds of it.
func (s *Modules) checkPolicy(ctx context.Context, m addrs.Module, version versions.Version) error {
	return s.gate.CheckModule(ctx, m, version, func(ctx context.Context) error {
		_, _, err := s.moduleVersions(ctx, m, false)
		return err
	})
}

// minForcedRefresh keeps a client asking for versions a module's list
// does not name from making the mirror fetch the list again more often
// than this (originModuleVersion), as a provider's is
// (mirror/providerlists.MinForcedRefresh).
const minForcedRefresh = time.Minute

// originModuleVersion is the origin's spelling of version ("v1.0.0"
// when the client asks for 1.0.0), from m's version list: the cached
// one, or, when it does not name the version (a client that asked for
// the version without listing first, or for a release newer than the
// list), the list as ModuleVersions gets it, fetched again from the
// origin when it is at least minForcedRefresh old. A version a list the
// origin answered lately does not name, or of a module the origin says
// it does not have, is not found (discovery.ErrNotFound) without asking
// the origin for its download, so that a client naming made-up versions
// costs the origin at most a list a minute, not a request each. When no
// such list can be had (the origin fails), the version is asked for in
// its canonical form.
func (s *Modules) originModuleVersion(ctx context.Context, m addrs.Module, version versions.Version) (string, error) {
	var list records.ModuleVersionList
	if _, err := s.store.GetMeta(records.ModuleVersionsKey(m), &list); err == nil {
		if raw, ok := list.OriginSpelling(version); ok {
			return raw, nil
		}
	}
	fresh, st, err := s.moduleVersions(ctx, m, false)
	if err == nil && !st.Stale && !st.Fetched {
		if raw, ok := fresh.OriginSpelling(version); ok {
			return raw, nil
		}
		if s.cfg.Now().Sub(st.StoredAt) >= minForcedRefresh {
			fresh, st, err = s.moduleVersions(ctx, m, true)
		}
	}
	switch {
	case errors.Is(err, discovery.ErrNotFound):
		return "", fmt.Errorf("module %s %s: %w", m, version, err)
	case err != nil || st.Stale:
		return version.String(), nil
	}
	if raw, ok := fresh.OriginSpelling(version); ok {
		return raw, nil
	}
	return "", fmt.Errorf("%w: module %s has no version %s", discovery.ErrNotFound, m, version)
}

// Package is an opened module package (a normalized tar.gz), read
// from the cache. Close it.
type Package struct {
	Record  records.ModuleRecord
	SHA256  string
	Size    int64
	ModTime time.Time
	// records.Source is records.Hit when the package was cached, records.Miss when this call
	// fetched it, records.Coalesced when it waited for another call's fetch.
	Source records.Source
	cachedBlob
}

// cachedBlob is an opened cached blob (a package or a zip) and the
// engine's work it holds until it is closed.
type cachedBlob struct {
	blob cache.BlobReader
	life *lifetime.Lifetime
}

// Content is the blob, for serving with Range and conditional requests.
func (b cachedBlob) Content() io.ReadSeeker { return b.blob }

// Close releases the blob.
func (b cachedBlob) Close() error {
	err := b.blob.Close()
	b.life.EndWork()
	return err
}

// storeSpool stores the bytes of spool, from its start, as the blob sha
// (a what: "module package", "module zip").
func (s *Modules) storeSpool(sha string, spool io.ReadSeeker, what string) error {
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return err
	}
	w, err := s.store.NewBlobWriter(sha)
	if err != nil {
		return fmt.Errorf("staging %s: %w", what, err)
	}
	defer w.Close()
	if _, err := io.Copy(w, spool); err != nil {
		return fmt.Errorf("staging %s: %w", what, err)
	}
	if _, err := w.Commit(""); err != nil {
		s.metrics.CacheWriteFailed()
		return fmt.Errorf("storing %s: %w", what, err)
	}
	return nil
}

// openBlob opens the cached blob sha as work of the engine; false when it
// is not cached or the engine shuts down.
func (s *Modules) openBlob(sha string) (cachedBlob, bool) {
	if !s.life.StartWork() {
		return cachedBlob{}, false
	}
	blob, err := s.store.OpenBlob(sha)
	if err != nil {
		s.life.EndWork()
		return cachedBlob{}, false
	}
	return cachedBlob{blob: blob, life: s.life}, true
}

// TimeoutError is the work on a module package (its fetch, its zip's
// making) that its time limit ended: Config.Timeout, which
// --module-timeout sets, named so that the operator who reads it in the
// log, or the client in its answer, learns which setting to raise. It is
// a context.DeadlineExceeded; Err is what the work failed with.
type TimeoutError struct {
	Timeout time.Duration
	Err     error
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("not done within %s (--module-timeout): %v", e.Timeout, e.Err)
}

func (e *TimeoutError) Unwrap() error { return e.Err }

// Is makes a TimeoutError a context.DeadlineExceeded, whatever Err kept of
// the deadline (a source's library may keep only its text).
func (e *TimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// timedOut is err, a *TimeoutError when ctx, one of once's, ended at its
// deadline (Config.Timeout): not a shutdown, which cancels it.
func (s *Modules) timedOut(ctx context.Context, err error) error {
	if err == nil || !errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.As(err, new(*TimeoutError)) {
		return err
	}
	return &TimeoutError{Timeout: s.cfg.Timeout, Err: err}
}

// once runs fetch once per key, however many callers ask at once, on the
// engine's context (a caller that gives up does not stop it, Config.Timeout
// bounds it), and waits for it or for ctx, which bounds this caller's wait
// only. The source is records.Miss for the call that ran fetch and
// records.Coalesced for the others, counted as such for kind (a metric
// label); waiting names what is waited for in ctx's error. A fetch that
// found what it was to make in the cache already (stored by a call that
// ended just before it began) says so with cached, and the source is
// records.Hit for every caller: none started or joined a download. A
// fetch that panics fails its callers with workgroup.ErrPanicked, logged
// with its stack.
func once[T any](ctx context.Context, s *Modules, key, kind, waiting string, fetch func(ctx context.Context) (res *T, cached bool, err error)) (T, records.Source, error) {
	type result struct {
		res    *T
		cached bool
	}
	var zero T
	var led atomic.Bool
	ch := s.pkgs.DoChan(key, workgroup.Guarded(s.log, func() (any, error) {
		led.Store(true)
		ctx, done, err := s.life.Detached(s.cfg.Timeout)
		if err != nil {
			return nil, err
		}
		defer done()
		res, cached, err := fetch(ctx)
		return result{res, cached}, s.timedOut(ctx, err)
	}, "key", key))
	var r result
	select {
	case c := <-ch:
		if c.Err != nil {
			return zero, 0, c.Err
		}
		r = c.Val.(result)
	case <-ctx.Done():
		return zero, 0, fmt.Errorf("waiting for %s: %w", waiting, ctx.Err())
	}
	switch {
	case r.cached:
		return *r.res, records.Hit, nil
	case led.Load():
		return *r.res, records.Miss, nil
	}
	s.metrics.Coalesced(kind)
	return *r.res, records.Coalesced, nil
}

// OpenModule opens the package of version of m: from the cache, or else
// fetched from its source host (one fetch per version, however many
// callers ask at once, on the engine's context: a caller that gives up
// does not stop it), normalized, checked against the record's sha256
// when there is one, and stored. ctx bounds the caller's wait only. It
// takes one of two fetch paths: the package is not cached
// (fetchMissing), or the package stored is refused by today's rules
// (refetchRefused). Errors: those of ModuleLocation,
// *modsource.UnsupportedError, *modsource.LimitError, ErrChanged (an
// integrity error), ErrPackageRefused and source host errors.
func (s *Modules) OpenModule(ctx context.Context, m addrs.Module, version versions.Version) (*Package, error) {
	rec, err := s.ModuleLocation(ctx, m, version)
	if err != nil {
		return nil, err
	}
	n := s.life.Notifier()
	n.Used(records.ModuleRecordKey(m, version))
	told := rec.SHA256
	if rec.SHA256 != "" {
		n.Serving("module", m.String(), version, rec.SHA256)
	}
	pkg, err := s.openModuleBlob(ctx, *rec, records.Hit)
	switch {
	case pkg != nil:
		s.metrics.CacheLookup("module_package", true)
		if rec.Tree == "" {
			s.trees.keep(ctx, m, version, rec.SHA256)
		}
		return pkg, nil
	case err == nil:
		s.metrics.CacheLookup("module_package", false)
		var stored *records.ModuleRecord
		if pkg, stored, err = s.fetchMissing(ctx, m, version, *rec); stored == nil {
			servingFetched(n, m, version, told, pkg)
			return pkg, err
		}
		rec = stored
	}
	pkg, err = s.refetchRefused(ctx, m, version, *rec, err)
	servingFetched(n, m, version, told, pkg)
	return pkg, err
}

// servingFetched tells n of pkg, the package of version of m fetched for
// OpenModule, when its sha256 is not the one n was told of before the
// fetch (was: "" for a version never fetched), so that a pin keeps it as
// it keeps a package served from the cache.
func servingFetched(n lifetime.Notifier, m addrs.Module, version versions.Version, was string, pkg *Package) {
	if pkg != nil && pkg.SHA256 != "" && pkg.SHA256 != was {
		n.Serving("module", m.String(), version, pkg.SHA256)
	}
}

// fetchMissing is OpenModule's path for a package the cache does not
// hold: fetched once per version, from the store beyond the cache when
// it has it (records.Shared), else from its source host (fetchModule),
// or refused when it cannot be (a sealed mirror, a local module imported
// without origin location). It returns the package opened; or, when the
// package was stored but opening it failed (refused by today's rules, as
// the shared store's copy may be), the record as completed and that
// error, which the caller hands to refetchRefused; else the error.
func (s *Modules) fetchMissing(ctx context.Context, m addrs.Module, version versions.Version, rec records.ModuleRecord) (*Package, *records.ModuleRecord, error) {
	recKey := records.ModuleRecordKey(m, version)
	res, src, err := once(ctx, s, "modpkg/"+recKey, "module_package", "the module's source",
		func(ctx context.Context) (*records.ModuleRecord, bool, error) {
			// Fetched by a caller whose fetch ended just before this one
			// began: its package is cached, the source is not asked again.
			if now, src, err := s.recs.ModuleRecord(ctx, recKey); err == nil && src == records.Hit && now.SHA256 != "" {
				if _, err := s.store.StatBlob(now.SHA256); err == nil {
					return now, true, nil
				}
			}
			fetched, err := s.recs.FetchModule(ctx, m, recKey, rec, modsource.MaxPackageBytes(s.cfg.Limits),
				func(ctx context.Context, rec records.ModuleRecord) (*records.ModuleRecord, error) {
					// What the store beyond the cache did not have.
					if s.cfg.Offline {
						return nil, fmt.Errorf("%w: package of module %s %s", records.ErrOffline, m, version)
					}
					if rec.Location == "" {
						return nil, fmt.Errorf("%w: package of module %s %s, a local module imported without origin location: import it again", records.ErrNotCached, m, version)
					}
					return s.fetchRelocated(ctx, m, version, rec, "")
				})
			return fetched, false, err
		})
	if err != nil {
		return nil, nil, err
	}
	pkg, err := s.openModuleBlob(ctx, res, src)
	switch {
	case pkg != nil:
		return pkg, nil, nil
	case err == nil:
		return nil, nil, fmt.Errorf("module %s %s was fetched but could not be stored in the cache", m, version)
	}
	return nil, &res, err
}

// refetchRefused is OpenModule's path for a package stored (in the
// cache, or copied from the shared store) that could not be opened:
// refused, an ErrPackageRefused when today's rules refuse it (else the
// error reading it, returned as it is). A refused package is made again
// from its source, past the shared store (whose copy may be the one
// refused), when rec can be fetched again (fetchable); the record is
// completed anew, and replaces this one once the fetch is stored
// (fetchModule), in the shared store too. Otherwise refused is returned,
// and the package kept: an import, a local module or a sealed mirror's
// package cannot be fetched again.
func (s *Modules) refetchRefused(ctx context.Context, m addrs.Module, version versions.Version, rec records.ModuleRecord, refused error) (*Package, error) {
	if !errors.Is(refused, ErrPackageRefused) || !s.fetchable(m, rec) {
		s.log.Error("stored module package refused by the rules in force; kept, not served: import the version again, or remove it and fetch it from its origin",
			"module", m.String(), "version", rec.Version, "provenance", rec.Provenance, "error", refused)
		return nil, refused
	}
	s.log.Warn("stored module package refused by the rules in force; fetching it again from its source",
		"module", m.String(), "version", rec.Version, "package", rec.Shown(), "error", refused)
	fresh := rec
	replaces := fresh.SHA256
	fresh.SHA256, fresh.Size, fresh.Commit, fresh.FetchedAt = "", 0, "", time.Time{}
	recKey := records.ModuleRecordKey(m, version)
	res, src, err := once(ctx, s, "modpkg/"+recKey+"/"+replaces, "module_package", "the module's source",
		func(ctx context.Context) (*records.ModuleRecord, bool, error) {
			res, err := s.fetchRelocated(ctx, m, version, fresh, replaces)
			return res, false, err
		})
	if err != nil {
		return nil, err
	}
	if pkg, err := s.openModuleBlob(ctx, res, src); pkg != nil || err != nil {
		return pkg, err
	}
	return nil, fmt.Errorf("module %s %s was fetched but could not be stored in the cache", m, version)
}

// openModuleBlob opens rec's cached package, nil when it is not cached,
// once it passes today's rules (checkPackage, whose error it returns).
func (s *Modules) openModuleBlob(ctx context.Context, rec records.ModuleRecord, src records.Source) (*Package, error) {
	if rec.SHA256 == "" {
		return nil, nil
	}
	b, ok := s.openBlob(rec.SHA256)
	if !ok {
		return nil, nil
	}
	if err := s.checkPackage(ctx, rec.SHA256, b.blob); err != nil {
		b.Close()
		return nil, err
	}
	info := b.blob.Info()
	return &Package{Record: rec, SHA256: rec.SHA256, Size: info.Size, ModTime: info.Created, Source: src, cachedBlob: b}, nil
}

// CheckCachedPackage holds rec's cached package to today's rules, as
// every package opened to be served is (checkPackage): for what reads a
// version's package from the cache by its sha256 (a bundle export).
// Errors: records.ErrNotCached when it is not cached; those of
// checkPackage (ErrPackageRefused).
func (s *Modules) CheckCachedPackage(ctx context.Context, rec records.ModuleRecord) error {
	pkg, err := s.openModuleBlob(ctx, rec, records.Hit)
	if err != nil {
		return err
	}
	if pkg == nil {
		return fmt.Errorf("%w: package of module %s %s", records.ErrNotCached, rec.Module, rec.Version)
	}
	return pkg.Close()
}

// fetchModule fetches, normalizes and stores the package of rec, the
// record of version of m, and returns the record completed with its
// sha256. replaces is the sha256 of a stored package today's rules
// refuse, which the record stored may still name ("" for none): it is
// replaced, as a record without sha256 is completed. said says rec's
// location, and its asking for the registry's credential, are the
// origin's own download answer (originSaid, fetchFromOrigins): only then
// is the origin's token sent with it (moduleCredentials).
func (s *Modules) fetchModule(ctx context.Context, m addrs.Module, version versions.Version, rec records.ModuleRecord, replaces string, said bool) (_ *records.ModuleRecord, err error) {
	withToken := rec.RegistryCredentials && said
	// What the source gave was refused a moment ago: the same answer,
	// with nothing downloaded (refusals).
	refusal := refusalKey(s.cfg.Limits, "fetch", records.ModuleRecordKey(m, version), rec.Location, strconv.FormatBool(rec.PackageURL()), strconv.FormatBool(rec.RegistryCredentials), strconv.FormatBool(withToken), rec.SHA256, replaces)
	if err := s.refused.get(refusal); err != nil {
		return nil, err
	}
	slotDone, err := s.takeSlot(ctx)
	if err != nil {
		return nil, err
	}
	defer slotDone()
	start := time.Now()
	var size int64
	defer func() {
		s.metrics.ModuleFetch(string(rec.Kind), moduleOutcome(ctx, err), size, time.Since(start))
		s.refused.note(refusal, err)
	}()
	mo, err := s.moduleOrigin("module package")
	if err != nil {
		return nil, err
	}
	addr, err := rec.Address()
	if err != nil {
		return nil, err
	}
	f := &modsource.Fetcher{
		HTTP: mo.SourceHTTPClient(m.Hostname),
		Open: func(ctx context.Context, u string) (io.ReadCloser, int64, error) {
			return mo.OpenSource(ctx, m.Hostname, u)
		},
		Limits:      s.cfg.Limits,
		TempDir:     s.cfg.ScratchDir,
		Credentials: s.moduleCredentials(m.Hostname, withToken),
	}
	spool, err := os.CreateTemp(s.cfg.ScratchDir, scratch.Pattern(scratch.Module, "", ".tar.gz"))
	if err != nil {
		return nil, err
	}
	defer func() { spool.Close(); os.Remove(spool.Name()) }()
	h := sha256.New()
	res, err := f.Fetch(ctx, addr, io.MultiWriter(spool, h))
	if errors.Is(err, safetree.ErrUnsafe) {
		// A package that would reach outside its tree is an integrity
		// failure of its source host's, as a tampered archive is.
		s.metrics.VerificationFailed(string(verify.ReasonBadArchive))
		err = &verify.Error{Reason: verify.ReasonBadArchive, Detail: fmt.Sprintf("module %s %s: %v", m, rec.Version, err)}
	}
	if err != nil {
		// The source's libraries may name the URL they were given.
		err = s.timedOut(ctx, redact.Error(err, rec.Location))
		if errors.Is(ctx.Err(), context.Canceled) {
			// ctx is the engine's (once): only its shutdown (at the
			// deadline) cancels it; its timeout is a deadline. Not a
			// fault, and said apart from one, as for an archive.
			s.log.Info("module package fetch stopped by shutdown; nothing was cached", "module", m.String(), "version", rec.Version,
				"package", rec.Shown(), "error", err)
			return nil, err
		}
		s.log.Error("module package fetch failed; nothing was cached", "module", m.String(), "version", rec.Version,
			"package", rec.Shown(), "error", err)
		return nil, err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if size, err = spool.Seek(0, io.SeekCurrent); err != nil {
		return nil, err
	}
	renewed := false // the package first stored, in other bytes: the record takes them
	if rec.SHA256 != "" && rec.SHA256 != sum {
		if !s.trees.same(ctx, rec, res.Tree, res.Commit) {
			detail := fmt.Sprintf("%s %s at %s: sha256 %s, first mirrored as %s", m, rec.Version, rec.Shown(), sum, rec.SHA256)
			if rec.Commit != "" && res.Commit != rec.Commit {
				detail += fmt.Sprintf(" (commit %s, first %s: the tag moved)", res.Commit, rec.Commit)
			}
			s.metrics.VerificationFailed(string(verify.ReasonChecksum))
			s.log.Error("module package changed at its source; refused, nothing was cached", "module", m.String(),
				"version", rec.Version, "detail", detail)
			return nil, &verify.Error{Reason: verify.ReasonChecksum, Detail: detail, Err: ErrChanged}
		}
		// The same files (compressed by another Go release's compressor).
		s.log.Info("module package fetched again is the one first mirrored, in other bytes; its record takes them", "module", m.String(),
			"version", rec.Version, "package", rec.Shown(), "sha256", sum, "first", rec.SHA256)
		renewed, replaces = true, rec.SHA256
	}
	if err := s.storeSpool(sum, spool, "module package"); err != nil {
		return nil, err
	}
	s.checked.Put(sum, s.checked.Generation(), nil) // made by today's rules
	if rec.SHA256 == "" || renewed {
		// In turn with ImportModule, which may have completed the record
		// since this fetch read it: the first package stays.
		s.life.Imports().Lock()
		var now records.ModuleRecord
		if _, err := s.store.GetMeta(records.ModuleRecordKey(m, version), &now); err == nil && now.SHA256 != "" && now.SHA256 != sum && now.SHA256 != replaces &&
			!s.trees.same(ctx, now, res.Tree, res.Commit) {
			s.life.Imports().Unlock()
			s.metrics.VerificationFailed(string(verify.ReasonChecksum))
			detail := fmt.Sprintf("%s %s at %s: sha256 %s, but %s was stored meanwhile", m, rec.Version, rec.Shown(), sum, now.SHA256)
			s.log.Error("module package changed at its source; refused", "module", m.String(), "version", rec.Version, "detail", detail)
			return nil, &verify.Error{Reason: verify.ReasonChecksum, Detail: detail, Err: ErrChanged}
		}
		rec.SHA256, rec.Size, rec.Tree, rec.Commit, rec.FetchedAt = sum, size, res.Tree, res.Commit, s.cfg.Now().UTC()
		err := s.store.PutMeta(records.ModuleRecordKey(m, version), rec)
		s.life.Imports().Unlock()
		if err != nil {
			s.metrics.CacheWriteFailed()
			return nil, fmt.Errorf("storing module record: %w", err)
		}
	}
	s.recs.ShareModule(ctx, records.ModuleRecordKey(m, version), &rec, spool)
	s.log.Info("module package cached", "module", m.String(), "version", rec.Version, "package", rec.Shown(),
		"commit", rec.Commit, "sha256", sum, "size", size)
	return &rec, nil
}

// takeSlot waits for one of the package fetch slots (Config.MaxFetches),
// counted as waiting while it does, or for ctx (the fetch's own: its
// Timeout, the shutdown) to end; done gives the slot back.
func (s *Modules) takeSlot(ctx context.Context) (done func(), err error) {
	select {
	case s.slots <- struct{}{}:
		return func() { <-s.slots }, nil
	default:
	}
	waited := s.metrics.ArchiveFetchWaiting()
	defer waited()
	select {
	case s.slots <- struct{}{}:
		return func() { <-s.slots }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for one of the %d module package fetch slots: %w", cap(s.slots), ctx.Err())
	}
}

// moduleCredentials returns the modsource.Fetcher's Credentials for a
// fetch of a module of origin: the origin's own credential for the
// package URL's host when withToken (the origin's own download answer
// asked for it for that URL: discovery.WithRegistryCredential, which the
// origin client fills in), else the credential the operator tied to
// origin for a URL's host, none otherwise.
func (s *Modules) moduleCredentials(origin svchost.Hostname, withToken bool) func(context.Context, string) context.Context {
	creds := s.cfg.Credentials
	if withToken {
		// A package URL is an archive: its URL is the only one asked.
		return func(ctx context.Context, rawURL string) context.Context {
			if creds != nil {
				ctx = sourceCredential(ctx, creds, origin, rawURL)
			}
			return discovery.WithRegistryCredential(ctx, rawURL)
		}
	}
	if creds == nil {
		return nil
	}
	return func(ctx context.Context, rawURL string) context.Context {
		return sourceCredential(ctx, creds, origin, rawURL)
	}
}

// sourceCredential returns ctx carrying the credential creds tie to
// origin for rawURL's host, ctx when none.
func sourceCredential(ctx context.Context, creds SourceCredentials, origin svchost.Hostname, rawURL string) context.Context {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "https" {
		return ctx
	}
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if p := u.Port(); p != "" && p != "443" {
		host += ":" + p
	}
	if c, ok := creds.SourceCredential(origin, host); ok {
		c.Host = host
		return discovery.WithSourceCredential(ctx, c)
	}
	return ctx
}

// moduleOutcome classifies a module fetch's error as a bounded label value.
func moduleOutcome(ctx context.Context, err error) string {
	var le *modsource.LimitError
	var ue *modsource.UnsupportedError
	switch {
	case err == nil:
		return "success"
	case errors.As(err, &le):
		return "too_large"
	case errors.As(err, &ue):
		return "unsupported"
	case errors.Is(err, ErrChanged):
		return "changed"
	case ctx.Err() != nil, discovery.Outcome(err) == "timeout":
		return "timeout"
	}
	return "error"
}

// Cached is a module version the engine holds a record of.
type Cached struct {
	Module  string // HOST/NS/NAME/SYSTEM
	Version string
	Record  records.ModuleRecord
	// Cached says the package is in the cache.
	Cached bool
	// Refused is the error of a record that today's rules refuse
	// (records.ErrModuleRecordRefused): not served, so not Cached, and
	// listed for the operator to see.
	Refused error

	cursor string
}

// Cursor names the module version for ListCachedModulesAfter: the
// listing after it.
func (cm Cached) Cursor() string { return cm.cursor }

// ListCachedModules calls fn for every module version with a record, in
// key order, until fn returns an error (which it returns).
func (s *Modules) ListCachedModules(fn func(Cached) error) error {
	return s.ListCachedModulesAfter("", "", fn)
}

// ListCachedModulesAfter is ListCachedModules of the module versions
// whose address (HOST/NAMESPACE/NAME/SYSTEM) starts with prefix and that
// come after the one whose Cursor is after ("": from the first), in the
// same order: a page of the listing costs what it holds.
func (s *Modules) ListCachedModulesAfter(prefix, after string, fn func(Cached) error) error {
	if after != "" {
		after = "module/" + after
	}
	return s.store.ScanMetaAfter("module/"+prefix, after, func(key string, _ time.Time, raw json.RawMessage) error {
		var rec records.ModuleRecord
		err := json.Unmarshal(raw, &rec)
		refused := errors.Is(err, records.ErrModuleRecordRefused)
		if (err != nil && !refused) || !records.KnownSchema(rec.Schema) {
			return nil
		}
		cm := Cached{Module: rec.Module, Version: rec.Version, Record: rec, cursor: strings.TrimPrefix(key, "module/")}
		if refused {
			cm.Refused = err
		} else if rec.SHA256 != "" {
			_, err := s.store.StatBlob(rec.SHA256)
			cm.Cached = err == nil
		}
		return fn(cm)
	})
}
