package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/mirror/cachecheck"
	"github.com/tfmirror/tfmirror/v2/mirror/fetch"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/mirror/inventory"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/mirror/notfound"
	"github.com/tfmirror/tfmirror/v2/mirror/ocistore"
	"github.com/tfmirror/tfmirror/v2/mirror/originguard"
	"github.com/tfmirror/tfmirror/v2/mirror/providerlists"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/sharedtier"
	"github.com/tfmirror/tfmirror/v2/mirror/stored"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// Origin is what the engine needs from origin registries and module
// source hosts: providers and modules. *discovery.Client implements it.
type Origin interface {
	ProviderOrigin
	modules.Origin
}

// ProviderOrigin is what the engine needs from origin registries for
// providers.
type ProviderOrigin interface {
	Versions(ctx context.Context, p addrs.Provider) (discovery.VersionList, error)
	Package(ctx context.Context, p addrs.Provider, version string, pl addrs.Platform) (*discovery.Package, error)
	// FetchSums fetches a package's SHA256SUMS and its signature, as the
	// package answer names them, in one call.
	FetchSums(ctx context.Context, p addrs.Provider, pkg *discovery.Package, sumsLimit, signatureLimit int64) (sums, signature []byte, err error)
	OpenArchive(ctx context.Context, p addrs.Provider, rawURL string) (io.ReadCloser, int64, error)
	// ArchiveSize learns an archive's size without downloading it (for
	// the OCI side's manifests, when the origin states none).
	ArchiveSize(ctx context.Context, p addrs.Provider, rawURL string) (int64, error)
}

// Store is what the engine needs from the cache. *cache.Store implements it.
type Store interface {
	PutMeta(key string, v any) error
	// PutMetaAt is PutMeta with the time of storing given.
	PutMetaAt(key string, v any, at time.Time) error
	// PutMetas is PutMeta of each document, in one transaction: all or none.
	PutMetas(docs map[string]any) error
	GetMeta(key string, v any) (time.Time, error)
	DeleteMeta(key string) error
	StatBlob(sha string) (cache.BlobInfo, error)
	// StatGeneration changes whenever an answer of StatBlob may have.
	StatGeneration() uint64
	// Headroom is how many bytes may still be written to the cache's file
	// system before its free space reaches the disk reserve; ok is false
	// when the cache does not check free space (see AirGap.DiskHeadroom).
	Headroom() (room int64, ok bool)
	OpenBlob(sha string) (cache.BlobReader, error)
	NewBlobWriter(expectedSHA string) (cache.BlobWriter, error)
	ScanMeta(prefix string, fn func(key string, storedAt time.Time, raw json.RawMessage) error) error
	// ScanMetaAfter is ScanMeta from the first key greater than after.
	ScanMetaAfter(prefix, after string, fn func(key string, storedAt time.Time, raw json.RawMessage) error) error
	Stats() (archives int, bytes int64)
	// Sync makes what was written so far durable (see AirGap.Sync).
	Sync() error
}

// Metrics receives what the engine observes. Package metrics implements it;
// a nil Metrics in Config records nothing.
type Metrics interface {
	// CacheLookup records a hit or miss for kind "versions", "package" or "archive".
	CacheLookup(kind string, hit bool)
	// StaleServed records a cached answer served because the origin failed.
	StaleServed(kind string)
	// records.Coalesced records a request that joined an origin fetch already under way.
	Coalesced(kind string)
	// VerificationFailed records a package refused for reason (a verify.Reason).
	VerificationFailed(reason string)
	// ArchiveFetchStarted records an origin archive fetch; done is called when it ends.
	ArchiveFetchStarted() (done func())
	// ArchiveFetchWaiting records an origin archive fetch waiting for one
	// of the download slots (Config.MaxArchiveDownloads); done ends the wait.
	ArchiveFetchWaiting() (done func())
	// CacheWriteFailed records data that could not be stored.
	CacheWriteFailed()
	// OCIWrongSizeDropped records a provider version whose OCI
	// documents were dropped: made with an archive size (as the origin
	// stated it) that its verified archive does not have.
	OCIWrongSizeDropped()
	modules.Metrics
	cachecheck.Metrics
	gate.Metrics
	notfound.Metrics
}

// SharedTier is the store replicas share behind their own caches
// (Config.Shared): sharedtier.Tier.
type SharedTier = sharedtier.Tier

// SharedLease is a lease on an archive's origin download: sharedtier.Lease.
type SharedLease = sharedtier.Lease

// recordSource is the engine's stored records as its parts take them, in
// one line of calls (mirror/stored.Source), with what the archives, the
// module side and a sealed mirror's lists ask of the store beyond the
// cache: the memo over the cache, or the shared tier composed over it.
type recordSource interface {
	stored.Source
	fetch.Copies
	modules.Records
	// Installable reports whether a sealed mirror can serve version v of
	// p from beyond the cache (rec: the cached record, if any).
	Installable(ctx context.Context, p addrs.Provider, v versions.Version, rec *records.PackageRecord) bool
}

// newRecordSource composes the engine's stored records: recs, the memo
// over the cache, decorated by the shared tier when there is one.
func newRecordSource(cfg *Config, tier SharedTier, life *lifetime.Lifetime, recs *stored.Records, store Store, log *slog.Logger, metrics Metrics) (recordSource, error) {
	if tier == nil {
		return recs, nil
	}
	return sharedtier.New(sharedtier.Config{Offline: cfg.Offline, Timeout: cfg.OriginTimeout, Platforms: cfg.Platforms, Now: cfg.Now},
		tier, life, recs, store, log, metrics)
}

// Config configures an Engine. Zero values take the documented defaults.
type Config struct {
	// AllowedOrigins are the origin registry hosts this mirror serves, in
	// any form svchost accepts. Providers of other hosts fail with
	// discovery.ErrHostNotAllowed and cause no outbound connection. Required.
	AllowedOrigins []string
	// UnsignedHosts are allowed origins under which versions without
	// signature (in-house builds) may be imported and are served; see
	// unsigned.go. Under any other allowed origin, Import refuses them
	// and versions imported so by an earlier release are withheld
	// (Withheld). Hosts that are not allowed origins need no entry: they
	// are local-only. Each must be in AllowedOrigins. Default: none.
	UnsignedHosts []string
	// Platforms limits the engine to these os_arch platforms. Empty means all.
	Platforms []string
	// VersionsTTL is how long a provider's version list is served from the
	// cache before it is refreshed from the origin. Default 10 minutes.
	VersionsTTL time.Duration
	// StaleAfter is how long a request waits for the refresh of a version
	// list the cache holds (a provider's or a module's; cmd/tfmirror gives
	// the CLI releases' lists the same, releases.Config.StaleAfter) before
	// it is answered with the cached list, stale, while the refresh goes
	// on.
	// Default 5 seconds: clients give up on a JSON answer after 10
	// (TF_REGISTRY_CLIENT_TIMEOUT), and an origin that stalls would
	// otherwise fail every init while its answer is awaited.
	StaleAfter time.Duration
	// OriginTimeout bounds one metadata operation against an origin
	// (discovery, version list, package metadata and checksums of a
	// version). It runs detached from the callers waiting for it.
	// Default 2 minutes.
	OriginTimeout time.Duration
	// ArchiveTimeout bounds one archive download from an origin. Default 1 hour.
	ArchiveTimeout time.Duration
	// OCIArchiveWait bounds how long the OCI door's answer of a
	// provider platform's manifest waits for its archive to be fetched
	// and verified (OCI.ManifestAnswer), so that a manifest made with a
	// size the origin stated wrongly is found out before any client
	// pulls it. Past it, the manifest is answered as it was made and the
	// download goes on. Default OriginTimeout.
	OCIArchiveWait time.Duration
	// MaxArchiveBytes refuses larger archives. Default 2 GiB.
	MaxArchiveBytes int64
	// MaxArchiveDownloads is how many archive downloads from origins run
	// at once; the others wait while a client waits for them (see
	// mirror/fetch.Fetcher). Default fetch.DefaultMaxDownloads (64). It
	// bounds module package fetches from source hosts too, in a pool of
	// their own (mirror/modules.Config.MaxFetches).
	MaxArchiveDownloads int
	// ArchiveLimits bound the check that an archive is an installable
	// package (the bytes it unpacks to, its entries), which runs under the
	// download's context (ArchiveTimeout, Shutdown). Zero fields take
	// verify's defaults: 2 GiB unpacked, 10,000 entries.
	ArchiveLimits verify.Limits
	// HoldBack is how many final bytes of an archive streamed while it is
	// still being fetched are withheld until its checksum has matched.
	// Default 64 KiB.
	HoldBack int64
	// Logger receives errors, once each. Default: discard.
	Logger *slog.Logger
	// Metrics receives observations. Default: none.
	Metrics Metrics
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// OriginRefused, when set, is told of each provider package an
	// origin answered that failed verification (its metadata or its
	// archive), with the origin's host and the reason (a verify.Reason),
	// after it was counted: the origin answered, and was not believed.
	// Not of imports, nor of copies from the shared tier. Default nil.
	OriginRefused func(origin, reason string)
	// Offline seals the mirror: no origin is ever contacted, cached
	// version lists are served however old, and whatever is not cached
	// fails with records.ErrOffline. Default false.
	Offline bool
	// Shared is the tier shared with other replicas, consulted on a cache
	// miss before the origin and given what was verified (see SharedTier).
	// Offline, whatever it holds is served. Default nil: none.
	Shared SharedTier
	// ModuleTimeout bounds one registry module package fetch from its
	// source host (a Git clone or an archive download, and its
	// normalization). Default 10 minutes.
	ModuleTimeout time.Duration
	// ModuleLimits bound one registry module package. Defaults: 256 MiB
	// downloaded, 512 MiB of files, 20000 entries, submodules 3 deep.
	ModuleLimits modsource.Limits
	// ScratchDir is where module packages are unpacked and normalized
	// while they are fetched (up to the ModuleLimits' sizes each).
	// Default: os.TempDir().
	ScratchDir string
	// ModuleSourceCredentials are the credentials module packages may be
	// fetched with, each tied to the origins whose modules may use it.
	// Default nil: every source is fetched anonymously.
	ModuleSourceCredentials modules.SourceCredentials
	// CheckEvery is how often VerifyCache checks the whole cache in the
	// background; 0: never (only when asked).
	CheckEvery time.Duration
	// NotFoundTTL is how long an origin's answer that a provider, a
	// version's package for a platform, an archive whose size the OCI
	// side asks, a module or a module version does not exist (its 404)
	// is remembered, and given again without asking the origin
	// (mirror/notfound); failures are never
	// remembered. Default 0: nothing is remembered (tfmirror serve's
	// not_found_ttl defaults to one minute). It is the period at start:
	// NotFound().SetTTL changes it while serving.
	NotFoundTTL time.Duration
	// NotFoundMaxEntries bounds the answers remembered for one allowed
	// origin, the least recently used dropped first. Default
	// notfound.DefaultMaxEntries. The bound at start, as NotFoundTTL
	// (NotFound().SetMaxEntries).
	NotFoundMaxEntries int
}

// Engine is the pull-through engine: it answers from the cache and fills
// it from origin registries, verifying everything before it is kept. Its
// methods are safe for concurrent use. Work done for many callers at once
// (origin fetches, archive downloads) runs on the engine's own context,
// which Shutdown and Close end.
type Engine struct {
	cfg Config
	// withholding keeps unsigned imports in their lane (mirror/unsigned).
	withholding *unsigned.Withholding
	platforms   platformSet      // nil = all
	origin      ProviderOrigin   // the Origin given to New, behind the offline guard, the not-found memory and the local-only guard
	records     *providerRecords // provider version lists and package records
	modules     *modules.Modules // the module side, on the Origin given to New behind the not-found memory
	airGap      *AirGap          // exports and imports of provider versions
	held        *Inventory       // the listings and removals retention uses
	store       Store
	log         *slog.Logger
	metrics     Metrics

	// hosts are the allowed origins and the hosts Import has loaded
	// providers of; those that are not allowed origins are local-only.
	hosts *originguard.Hosts
	// notFound remembers the origins' not-found answers for its period
	// (Config.NotFoundTTL at start; nil in a sealed mirror, which asks no
	// origin); it decorates the provider and module origins, beneath the
	// local-only guard.
	notFound *notfound.Memory

	archives *fetch.Fetcher  // fetches each archive once, verified before its last bytes
	memo     *stored.Records // version lists and package records, read through a memo
	source   recordSource    // the memo, or the shared tier over it (Config.Shared)
	gate     *gate.Gate      // the package policy and release times
	oci      ocistore.Sides  // the OCI sides built on the engine (NewOCI)

	// life is the engine's lifetime, not any caller's: the root context
	// that origin fetches and archive downloads run on, the work Shutdown
	// waits for, the coalescing of fetches, the import lock and the
	// Notifier told what the engine serves and imports (see
	// Inventory.Notify). Shutdown and Close end it.
	life *lifetime.Lifetime
	// onStop is a test hook: called once no more work is taken.
	onStop func()
	// checker checks the whole cache again (VerifyCache); Shutdown and
	// Close end its checks first: they serve no client.
	checker *cachecheck.Checker
}

// New validates cfg and returns an Engine using origin (for providers
// and modules) and store. Both are required: New fails without either,
// rather than giving an engine that fails on its first request. Call
// Shutdown or Close when done with it, before closing the store.
func New(cfg Config, origin Origin, store Store) (*Engine, error) {
	if isNil(origin) {
		return nil, errors.New("mirror: an origin is required")
	}
	if isNil(store) {
		return nil, errors.New("mirror: a store is required")
	}
	if len(cfg.AllowedOrigins) == 0 {
		return nil, errors.New("mirror: at least one allowed origin host is required")
	}
	s := &Engine{
		cfg:     cfg,
		origin:  origin,
		store:   store,
		log:     cfg.Logger,
		metrics: cfg.Metrics,
	}
	s.cfg.AllowedOrigins = nil
	var allowed []svchost.Hostname
	for _, h := range cfg.AllowedOrigins {
		host, err := addrs.ParseHost(strings.TrimSpace(h))
		if err != nil {
			return nil, fmt.Errorf("mirror: allowed origin %q: %w", h, err)
		}
		if !slices.Contains(allowed, host) {
			allowed = append(allowed, host)
			s.cfg.AllowedOrigins = append(s.cfg.AllowedOrigins, host.String())
		}
	}
	slices.Sort(s.cfg.AllowedOrigins)
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
		s.cfg.Logger = s.log
	}
	s.memo = stored.New(store, s.log)
	w, err := unsigned.New(unsigned.Config{AllowedOrigins: s.cfg.AllowedOrigins, UnsignedHosts: cfg.UnsignedHosts,
		Offline: cfg.Offline, Logger: s.log}, s.memo, store)
	if err != nil {
		return nil, err
	}
	s.withholding, s.cfg.UnsignedHosts = w, w.UnsignedHosts()
	s.cfg.Platforms = nil
	if len(cfg.Platforms) > 0 {
		s.platforms = make(platformSet)
		for _, p := range cfg.Platforms {
			pl, err := addrs.ParsePlatform(strings.TrimSpace(p))
			if err != nil {
				return nil, fmt.Errorf("mirror: platforms: %w", err)
			}
			if !s.platforms[pl.String()] {
				s.platforms[pl.String()] = true
				s.cfg.Platforms = append(s.cfg.Platforms, pl.String())
			}
		}
		slices.Sort(s.cfg.Platforms)
	}
	if s.cfg.VersionsTTL <= 0 {
		s.cfg.VersionsTTL = 10 * time.Minute
	}
	if s.cfg.StaleAfter <= 0 {
		s.cfg.StaleAfter = 5 * time.Second
	}
	if s.cfg.OriginTimeout <= 0 {
		s.cfg.OriginTimeout = 2 * time.Minute
	}
	if s.cfg.ArchiveTimeout <= 0 {
		s.cfg.ArchiveTimeout = time.Hour
	}
	if s.cfg.OCIArchiveWait <= 0 {
		s.cfg.OCIArchiveWait = s.cfg.OriginTimeout
	}
	if s.cfg.MaxArchiveBytes <= 0 {
		s.cfg.MaxArchiveBytes = 2 << 30
	}
	if s.cfg.MaxArchiveDownloads <= 0 {
		s.cfg.MaxArchiveDownloads = fetch.DefaultMaxDownloads
	}
	if s.cfg.ModuleTimeout <= 0 {
		s.cfg.ModuleTimeout = 10 * time.Minute
	}
	l := &s.cfg.ModuleLimits
	if l.MaxDownloadBytes <= 0 {
		l.MaxDownloadBytes = 256 << 20
	}
	if l.MaxTreeBytes <= 0 {
		l.MaxTreeBytes = 512 << 20
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = 20000
	}
	if l.MaxSubmoduleDepth <= 0 {
		l.MaxSubmoduleDepth = 3
	}
	if s.cfg.HoldBack <= 0 {
		s.cfg.HoldBack = 64 << 10
	}
	if s.cfg.Now == nil {
		s.cfg.Now = time.Now
	}
	if s.metrics == nil {
		s.metrics = noMetrics{}
	}
	s.life = lifetime.New(s.cfg.OriginTimeout, s.metrics, s.log)
	// The origin stack: the origin given (a sealed mirror's instead),
	// the not-found memory over it, the local-only guard on top. The
	// release times the package policy judges by are asked through the
	// guard alone (releaseOrigin): what dates a version is never an
	// answer remembered.
	if s.cfg.Offline {
		s.origin = originguard.Offline()
	}
	if s.hosts, err = originguard.NewHosts(allowed, store); err != nil {
		return nil, fmt.Errorf("mirror: %w", err)
	}
	if !s.cfg.Offline {
		s.notFound, err = notfound.New(notfound.Config{TTL: s.cfg.NotFoundTTL, MaxEntries: s.cfg.NotFoundMaxEntries,
			Origins: allowed, Now: s.cfg.Now}, s.metrics)
		if err != nil {
			return nil, fmt.Errorf("mirror: %w", err)
		}
	}
	if s.notFound == nil {
		s.cfg.NotFoundTTL, s.cfg.NotFoundMaxEntries = 0, 0
	} else {
		s.cfg.NotFoundTTL, s.cfg.NotFoundMaxEntries = s.notFound.TTL(), s.notFound.MaxEntries()
	}
	releaseOrigin := originguard.Local(s.origin, s.hosts)
	s.origin = originguard.Local(s.notFound.Providers(s.origin), s.hosts)
	modOrigin := s.notFound.Modules(origin) // a sealed mirror's module side asks no origin itself
	if err := s.withholding.Find(); err != nil {
		return nil, fmt.Errorf("mirror: looking for versions imported without signature under origin hosts: %w", err)
	}
	if s.source, err = newRecordSource(&s.cfg, cfg.Shared, s.life, s.memo, store, s.log, s.metrics); err != nil {
		return nil, err
	}
	// Before anything reads a module's records: those an earlier release
	// keyed by another spelling of the module are moved to its normal
	// form's keys, and offered to the shared tier under them (what cannot
	// be moved now stays, and is moved at the next start).
	if n, err := records.NormalizeModuleKeys(store, s.source.Share, s.log); err != nil {
		s.log.Warn("module records keyed by another spelling of their module could not all be moved to their normal keys; they are read again at the next start", "moved", n, "error", err)
	} else if n > 0 {
		s.log.Info("module records keyed by another spelling of their module moved to their normal keys", "moved", n)
	}
	s.records = &providerRecords{life: s.life, hosts: s.hosts, withholding: s.withholding, platforms: s.platforms, source: s.source, cfg: &s.cfg, origin: s.origin, store: store, memo: s.memo, log: s.log, metrics: s.metrics}
	if s.gate, err = gate.New(gate.Config{Offline: s.cfg.Offline, Platforms: s.cfg.Platforms, Now: s.cfg.Now, Logger: s.log},
		gate.Parts{Life: s.life, Source: s.source, Hosts: s.hosts, Records: s.memo}, releaseOrigin, store, s.metrics); err != nil {
		return nil, err
	}
	s.records.gate = s.gate
	if s.records.lists, err = providerlists.New(providerlists.Config{Offline: s.cfg.Offline, VersionsTTL: s.cfg.VersionsTTL, StaleAfter: s.cfg.StaleAfter, Now: s.cfg.Now, Logger: s.log,
		UnsignedHosts: s.withholding.UnsignedHosts()},
		providerlists.Parts{Life: s.life, Hosts: s.hosts, Records: s.source, Gate: s.gate, Withholding: s.withholding}, s.origin, s.metrics); err != nil {
		return nil, err
	}
	if s.archives, err = fetch.New(fetch.Config{ArchiveTimeout: s.cfg.ArchiveTimeout, MaxArchiveBytes: s.cfg.MaxArchiveBytes, ArchiveLimits: s.cfg.ArchiveLimits,
		MaxDownloads: s.cfg.MaxArchiveDownloads, HoldBack: s.cfg.HoldBack, Offline: s.cfg.Offline, OriginRefused: s.cfg.OriginRefused, Logger: s.log}, fetch.Parts{Life: s.life, Copies: s.source}, s.origin, store, s.metrics); err != nil {
		return nil, err
	}
	mcfg := modules.Config{Offline: s.cfg.Offline, Now: s.cfg.Now, VersionsTTL: s.cfg.VersionsTTL, StaleAfter: s.cfg.StaleAfter, Timeout: s.cfg.ModuleTimeout,
		Limits: s.cfg.ModuleLimits, MaxFetches: s.cfg.MaxArchiveDownloads, ScratchDir: s.cfg.ScratchDir, Credentials: s.cfg.ModuleSourceCredentials, Logger: s.log}
	if s.modules, err = modules.New(mcfg, modules.Parts{Life: s.life, Records: s.source, Hosts: s.hosts, Gate: s.gate, NotFound: s.notFound}, modOrigin, store, s.metrics); err != nil {
		return nil, err
	}
	h, err := inventory.New(inventory.Config{Offline: s.cfg.Offline, Now: s.cfg.Now}, inventory.Parts{Life: s.life,
		Records: s.memo, Source: s.source, Hosts: s.hosts, Withholding: s.withholding, OCI: &s.oci, Gate: s.gate}, store)
	if err != nil {
		return nil, err
	}
	s.held = &Inventory{Inventory: h, life: s.life, cfg: s.cfg}
	if s.airGap, err = newAirGap(s); err != nil {
		return nil, err
	}
	s.checker, err = cachecheck.New(cachecheck.Config{CheckEvery: s.cfg.CheckEvery, Now: s.cfg.Now, Logger: s.log,
		VerifyCached: s.records.verifyCached, Shared: cfg.Shared != nil}, store, s.metrics)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Modules returns the engine's registry-module side.
func (s *Engine) Modules() *modules.Modules { return s.modules }

// NotFound returns what the engine remembers of its origins' not-found
// answers (Config.NotFoundTTL): nil, which remembers nothing, in a
// sealed mirror. Its period and bound may be changed while serving.
func (s *Engine) NotFound() *notfound.Memory { return s.notFound }

// AirGap returns the engine's side of exports and imports of provider
// versions.
func (s *Engine) AirGap() *AirGap { return s.airGap }

// CacheChecker returns the engine's check of the whole cache.
func (s *Engine) CacheChecker() *cachecheck.Checker { return s.checker }

// Inventory returns what the engine tells retention of the versions it holds.
func (s *Engine) Inventory() *Inventory { return s.held }

// Config returns the configuration in effect: cfg as given to New with
// every default filled in, AllowedOrigins and UnsignedHosts in svchost
// comparison form and Platforms canonical, all sorted. Slices are copies.
func (s *Engine) Config() Config { return s.cfg.clone() }

// clone returns c with copies of its slices.
func (c Config) clone() Config {
	c.AllowedOrigins = slices.Clone(c.AllowedOrigins)
	c.UnsignedHosts = slices.Clone(c.UnsignedHosts)
	c.Platforms = slices.Clone(c.Platforms)
	return c
}

// CheckOrigin returns nil when p's host is an allowed origin, and an error
// wrapping discovery.ErrHostNotAllowed otherwise. The package policy's
// layer (mirror/served) asks it, with the address rules, before any call
// reaches the engine's package API, whose methods do not ask it again;
// the origin side refuses such a host on its own (the origin client's
// allowed origins, mirror/originguard for a local-only host).
//
// A host that is not an allowed origin but that Import has loaded
// providers of is local-only: its providers are served from the cache
// and the host is never contacted.
func (s *Engine) CheckOrigin(p addrs.Provider) error {
	return s.hosts.Check(p.Hostname)
}

// wait blocks until every origin fetch and archive download under way has
// ended, or ctx is done. The engine keeps working; see Shutdown. Tests of
// other packages get it through internal/testrig/enginetest.
func (s *Engine) wait(ctx context.Context) error { return s.life.Wait(ctx) }

// Shutdown stops the engine: it starts no more work (new calls that would
// need the origin fail with records.ErrShutDown), lets the fetches and downloads
// under way finish until ctx is done, then cancels those still running
// and waits for them to end. When it returns, the engine no longer uses
// the store, which may then be closed. It returns ctx's error when work
// had to be cancelled.
func (s *Engine) Shutdown(ctx context.Context) error {
	s.checker.Stop()
	s.stop()
	err := s.life.Wait(ctx)
	s.life.Cancel()
	if err != nil {
		// Cancelled downloads end promptly: they wait only on the origin.
		s.life.Wait(context.Background())
	}
	return err
}

// Close is Shutdown without a grace period: work under way is cancelled.
func (s *Engine) Close() error {
	s.checker.Stop()
	s.stop()
	s.life.Cancel()
	return s.life.Wait(context.Background())
}

// stop takes no more work (see lifetime.Lifetime.Stop).
func (s *Engine) stop() {
	s.life.Stop()
	if s.onStop != nil {
		s.onStop()
	}
}

// Stats returns how many archives the cache holds, and their total size.
func (s *Engine) Stats() (archives int, bytes int64) { return s.store.Stats() }

// platformSet are the platforms served (the --platforms filter), nil for
// all.
type platformSet map[string]bool

// serves reports whether platform pl is served.
func (ps platformSet) serves(pl string) bool {
	return ps == nil || ps[pl]
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

type noMetrics struct{}

func (noMetrics) CacheLookup(string, bool)                         {}
func (noMetrics) StaleServed(string)                               {}
func (noMetrics) Coalesced(string)                                 {}
func (noMetrics) VerificationFailed(string)                        {}
func (noMetrics) ArchiveFetchStarted() func()                      { return func() {} }
func (noMetrics) ArchiveFetchWaiting() func()                      { return func() {} }
func (noMetrics) CacheWriteFailed()                                {}
func (noMetrics) OCIWrongSizeDropped()                             {}
func (noMetrics) ModuleFetch(string, string, int64, time.Duration) {}
func (noMetrics) CacheChecked(time.Time, int, int)                 {}
func (noMetrics) PolicyRefused(string)                             {}
func (noMetrics) NotFoundRemembered(string)                        {}
func (noMetrics) NotFoundEntries(string, int)                      {}

// isNil reports whether v is nil, or a nil pointer in an interface.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}
