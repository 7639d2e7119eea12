package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tfmirror/tfmirror/v2/airgap"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/originwatch"
	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/tlsroots"
	"github.com/tfmirror/tfmirror/v2/manifest"
	"github.com/tfmirror/tfmirror/v2/metrics"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/served"
	"github.com/tfmirror/tfmirror/v2/releases"
	"github.com/tfmirror/tfmirror/v2/retention"
	"github.com/tfmirror/tfmirror/v2/sharedstore"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// engineParts is what openEngine opens: the pull-through engine with the
// cache and the origin client it uses, and the cache's retention.
type engineParts struct {
	engine    *mirror.Engine
	retention *retention.Retainer
	store     *cache.Store
	origin    *discovery.Client
	// originCAs follows origin_ca_file's files (none: it reads none,
	// until a reload names some).
	originCAs *originCAs
	shared    *sharedstore.Store // nil without --shared-store
	releases  *served.Releases   // the CLI releases side, behind the package policy
	// cliSide is the CLI releases side beneath the policy, for what
	// export and import carry (they judge each version themselves).
	cliSide *releases.Releases
	// mirrorHost is the host of the public URL in force, which the origin
	// client refuses as a module source (discovery.Config.MirrorHost); a
	// reload's public URL is put in it (liveSettings).
	mirrorHost *publicHost
	// metadataTimeout bounds one metadata operation against an origin
	// (mirror.Config.OriginTimeout), derived from the origin limits.
	metadataTimeout time.Duration
	// shutdown shuts the engine down (work under way gets until ctx is done,
	// then is cancelled) and then closes the cache, so that nothing
	// writes to the cache once it is closed.
	shutdown func(ctx context.Context) error

	ociOnce sync.Once // makes oci, the engine's OCI side, once
	oci     *mirror.OCI
	ociErr  error

	pkgsOnce sync.Once // makes pkgs, the package API behind the policy, once
	pkgs     *served.Packages
	pkgsErr  error
}

// publicHost is the host of the mirror's public URL in force, "" when it
// has none.
type publicHost struct{ host atomic.Pointer[string] }

// set puts publicURL's host in force ("" for none, or one that does not
// parse: settings validated it).
func (p *publicHost) set(publicURL string) {
	h := ""
	if u, err := url.Parse(publicURL); err == nil {
		h = u.Hostname()
	}
	p.host.Store(&h)
}

func (p *publicHost) get() string {
	if h := p.host.Load(); h != nil {
		return *h
	}
	return ""
}

// metadataStages is how many origin requests, one after the other, one
// metadata operation is given time for, each with all its retries:
// service discovery, the version list, the package metadata, then
// SHA256SUMS and its signature (fetched together). An operation that
// needs more rounds (package metadata of many platforms, a few at a time)
// shares this budget.
const metadataStages = 4

// openEngine opens the pull-through engine without any server, so that
// serve and subcommands that work on the cache share one wiring: config ->
// cache store (in DATA-DIR/cache) -> origin client -> engine. met, when
// not nil (serve's), receives the cache's, the origin client's and the
// engine's observations; nil is a command's, which exits right after its
// work, so its cache collects as it closes what its last deletions freed
// (cache.Options.CollectAtClose). watch, when not nil, receives the end
// of each origin request and each package an origin answered that failed
// verification (the status page's origin rows). The caller must call the
// returned parts' shutdown.
func openEngine(cfg settings.Config, logger *slog.Logger, o overrides, met *metrics.Metrics, watch *originwatch.Watch) (_ *engineParts, err error) {
	reserve := cfg.DiskReserve
	if reserve == 0 {
		reserve = -1 // the flag's "no check"
	}
	copts := cache.Options{
		Dir:         cacheDir(cfg.DataDir),
		Logger:      logger,
		MaxBytes:    cfg.CacheMaxBytes,
		DiskReserve: reserve,
		// Nothing is evicted before retention has read what cannot be
		// fetched again (it then says what may be: retention.Retainer.Evictable).
		Evictable:      func(string) bool { return false },
		CollectAtClose: met == nil,
	}
	if met != nil {
		copts.OnEvict = func(cache.BlobInfo) { met.Evicted(1) }
		copts.OnDamaged = met.CacheDamagedRead
	}
	var evicted *retention.Evictions // listed by cache prune
	if o.listEvictions && copts.OnEvict == nil {
		evicted = &retention.Evictions{}
		copts.OnEvict = evicted.Add
	}
	store, err := cache.Open(copts)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		// The cache's directory lock is held: say by whom, and what to do.
		return nil, fmt.Errorf("opening cache: %w (another tfmirror holds the data directory %s: a serve, or a command such as sync that opened it; stop it, or give this one another --data-dir)", err, cfg.DataDir)
	}
	if err != nil && cacheUnreadable(err) {
		// Badger refused what it found in the directory: say what that
		// means for the mirror, and what to do.
		return nil, fmt.Errorf("opening cache: %w (the cache %s could not be read: unless the error names a permission or a full disk, its files are damaged or of a format this release does not read; stop tfmirror, move %s aside and start again: an empty cache is made, what the origins serve is fetched again, and what was imported must be imported again)", err, copts.Dir, copts.Dir)
	}
	if err != nil {
		return nil, fmt.Errorf("opening cache: %w", err)
	}
	defer func() {
		if err != nil {
			store.Close()
		}
	}()
	// Imports unpack tar files into the data directory (adminOptions):
	// what one whose process died left there goes, once the cache is ours.
	if err := airgap.RemoveScratch(cfg.DataDir, logger); err != nil {
		logger.Warn("could not remove what an interrupted import left unpacked", "error", err)
	}
	if err := removeModuleScratch(cfg.DataDir, logger); err != nil {
		logger.Warn("could not remove what interrupted module work left behind", "error", err)
	}
	var countCAs func(string)
	if met != nil {
		countCAs = met.OriginCAReload
	}
	cas, roots, err := startOriginCAs(cfg.OriginCAFile, o.rootCAs, logger, countCAs)
	if err != nil {
		return nil, err
	}
	originCfg := discovery.Config{
		AllowedOrigins:  cfg.AllowedOrigins,
		UserAgent:       "tfmirror/" + thisBuild().Version,
		AllowPrivate:    cfg.AllowPrivateOrigins,
		RootCAs:         roots,
		TrustHint:       trustHint(cfg.OriginCAFile),
		DialContext:     o.dialContext,
		DiscoveryTTL:    cfg.DiscoveryTTL,
		MaxArchiveBytes: cfg.MaxArchiveBytes,
		RequestTimeout:  cfg.OriginTimeout,
		// The flags say 0 for "none"; discovery.Config says negative.
		MinSpeed:         disabledIfZero(cfg.OriginMinSpeed),
		MinSpeedWindow:   disabledIfZero(cfg.OriginMinSpeedWindow),
		Retries:          disabledIfZero(cfg.OriginRetries),
		BreakerThreshold: disabledIfZero(cfg.BreakerThreshold),
		BreakerCooldown:  cfg.BreakerCooldown,
		Logger:           logger,
	}
	own := &publicHost{}
	own.set(cfg.PublicURL)
	originCfg.MirrorHost = own.get
	if met != nil {
		originCfg.Observer = met
	}
	if watch != nil {
		originCfg.Watcher = watch
	}
	if err := originNetwork(&originCfg, cfg, o, logger); err != nil {
		return nil, err
	}
	if o.origin != nil {
		o.origin(&originCfg)
	}
	client, err := discovery.New(originCfg)
	if err != nil {
		return nil, err
	}
	// The CAs in force, followed by the origin client and the shared
	// store's: origin_ca_file's files read again put new ones in force.
	trust := tlsroots.New(roots)
	trust.Follow(client.SetRootCAs)
	cas.put = trust.Set
	parts := &engineParts{store: store, origin: client, originCAs: cas, mirrorHost: own, metadataTimeout: metadataStages * client.MaxRequestTime()}
	ecfg := mirror.Config{
		AllowedOrigins:      cfg.AllowedOrigins,
		UnsignedHosts:       cfg.AllowUnsignedHosts,
		Platforms:           cfg.Platforms,
		VersionsTTL:         cfg.VersionsTTL,
		OriginTimeout:       parts.metadataTimeout,
		MaxArchiveBytes:     cfg.MaxArchiveBytes,
		MaxArchiveDownloads: cfg.MaxArchiveDownloads,
		ArchiveLimits:       verify.Limits{MaxUnpackedBytes: cfg.ArchiveMaxUnpacked, MaxEntries: cfg.ArchiveMaxEntries},
		Logger:              logger,
		Offline:             cfg.Offline,
	}
	ecfg.ModuleTimeout, ecfg.ModuleLimits = cfg.ModuleTimeout, moduleLimits(cfg.ModuleConfig)
	ecfg.CheckEvery = cfg.CacheVerifyInterval
	ecfg.NotFoundTTL, ecfg.NotFoundMaxEntries = cfg.NotFoundTTL, cfg.NotFoundMaxEntries
	ecfg.ScratchDir = cfg.DataDir // module packages are unpacked beside the cache, not in a small /tmp
	if cfg.ModuleSourceCredentials != "" {
		creds, err := loadModuleSourceCredentials(cfg.ModuleSourceCredentials, cfg.AllowedOrigins, o.lookupEnv)
		if err != nil {
			return nil, err
		}
		ecfg.ModuleSourceCredentials = creds
		logger.Info("module source credentials loaded", "hosts", creds.summary())
		for _, tie := range creds.publicTies() {
			logger.Warn("a module source credential is tied to a public registry: anyone who publishes a module there can have the mirror read, with it, any repository it reads, and serve it to the mirror's clients",
				"credential", tie)
		}
	}
	shared, err := openShared(context.Background(), cfg, trust, logger, met)
	if err != nil {
		return nil, err
	}
	rcfg := retentionRules(cfg.RetentionConfig, cfg.CacheMaxBytes)
	rcfg.EvictNothing = o.evictNothing
	rcfg.Evictions = evicted
	var rshared retention.Shared // nil without a shared store
	if shared != nil {
		parts.shared = shared
		ecfg.Shared = sharedTier{shared}
		rshared = sharedTier{shared}
	}
	if met != nil {
		ecfg.Metrics = met
		rcfg.Metrics = met
	}
	if watch != nil {
		ecfg.OriginRefused = watch.Refused
	}
	engine, err := mirror.New(ecfg, client, store)
	if err != nil {
		return nil, err
	}
	rel, err := openReleases(cfg, logger, client, engine, store, met)
	if err != nil {
		engine.Close()
		return nil, err
	}
	rcfg.Refused = policyRefuses(engine, rel)
	rcfg.CLI = rel.Inventory() // retention counts the CLI versions too
	ret, err := retention.New(rcfg, engine.Inventory(), store, rshared)
	if err != nil {
		rel.Close()
		engine.Close()
		return nil, err
	}
	servedRel, err := servedReleases(rel, engine, logger, met)
	if err != nil {
		rel.Close()
		ret.Close()
		engine.Close()
		return nil, err
	}
	parts.engine, parts.retention, parts.releases, parts.cliSide = engine, ret, servedRel, rel
	parts.shutdown = func(ctx context.Context) error {
		rel.Close()
		serr := engine.Shutdown(ctx)
		switch {
		case errors.Is(serr, context.Canceled):
			// Asked to stop at once (an interrupted sync, a second signal).
			logger.Info("archive downloads still running were stopped")
		case serr != nil:
			logger.Warn("archive downloads still running at the shutdown deadline were cancelled", "error", serr)
		}
		// The service discoveries no caller waits for any more, after
		// the engine and the releases side that asked for them.
		client.Close()
		// After the engine, so that the last uses of the downloads that
		// ended are written; before the cache is closed.
		ret.Close()
		if err := store.Close(); err != nil {
			return fmt.Errorf("closing cache: %w", err)
		}
		if errors.Is(serr, context.DeadlineExceeded) || errors.Is(serr, context.Canceled) {
			return nil
		}
		return serr
	}
	return parts, nil
}

// cacheUnreadable says whether err, cache.Open's, is the database's
// refusal of what it found in the cache directory (a manifest, key
// registry or log file damaged, or of a format this release does not
// read) rather than of the directory or the machine: its lock held, a
// permission, a full disk, too many open files, no memory. The database
// does not always keep the cause of its errors, so the message that says
// what to do names these too.
func cacheUnreadable(err error) bool {
	for _, other := range []error{syscall.EWOULDBLOCK, fs.ErrPermission, syscall.ENOSPC, syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM} {
		if errors.Is(err, other) {
			return false
		}
	}
	return !strings.Contains(err.Error(), "Cannot acquire directory lock")
}

// moduleLimits are the engine's module limits.
func moduleLimits(c settings.ModuleConfig) modsource.Limits {
	return modsource.Limits{MaxDownloadBytes: c.ModuleMaxBytes, MaxTreeBytes: c.ModuleMaxTreeBytes, MaxEntries: c.ModuleMaxFiles}
}

// retentionRules are the retention c sets of a cache limited to maxBytes.
func retentionRules(c settings.RetentionConfig, maxBytes int64) retention.Config {
	r := retention.Config{KeepVersions: c.KeepVersions, KeepPerMajor: c.KeepPerMajor,
		UnusedAfter: c.EvictUnusedAfter, Interval: c.RetentionInterval, MaxBytes: maxBytes}
	if r.Interval == 0 {
		r.Interval = -1 // only when asked: a command that is not serve
	}
	if c.PinsDir != "" {
		r.Pins = manifest.NewPinsDir(c.PinsDir)
	}
	return r
}
