package retention

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/mirror"
	mirrorheld "github.com/tfmirror/tfmirror/v2/mirror/inventory"
)

// Config configures retention. The zero value keeps everything the size
// limit does not evict, and still keeps what cannot be fetched again from
// the size limit.
type Config struct {
	// KeepVersions keeps only the newest KeepVersions versions with cached
	// packages of each provider, each module and each CLI product; the
	// packages of older versions are removed. The newest are releases: a
	// prerelease takes no place among them, and is removed only when it
	// is older than all of them; with fewer releases than KeepVersions,
	// the newest prereleases take the places left. Versions of the same
	// precedence (builds, 1.2.0+a and 1.2.0+b) are ordered by their
	// spelling, the greater the newer. Default 0: no such rule.
	KeepVersions int
	// KeepPerMajor applies KeepVersions to each major version apart.
	// Default false.
	KeepPerMajor bool
	// Refused, when set, says whether the package policy refuses to
	// serve a version now (kind "provider", "module" or "cli"; version
	// as keyed). A refused version takes no place among the KeepVersions
	// newest: the newest KeepVersions versions that are served are kept,
	// and a refused version is removed only when it is older than all of
	// them (a newer one may be allowed later: a cooldown ends, a deny is
	// lifted). A pinned version is kept whatever the policy says; the
	// policy decides what is served, retention what is kept. Default
	// nil: none is refused.
	Refused func(kind, address, version string) bool
	// UnusedAfter removes the packages of versions not downloaded for
	// this long (a version never downloaded, or cached again since its
	// last download, counts from when its newest package was cached).
	// Default 0: no such rule (the last uses are written all the same,
	// for a rule turned on later).
	UnusedAfter time.Duration
	// Pins, when set, says which versions are pinned: no rule and no size
	// limit removes their packages. Default nil: none.
	Pins PinSource
	// CLI, when set, are the CLI release versions the cache holds
	// (*releases.Inventory): the rules, the pins, the size limit's
	// protection and Prune count them as they count providers and
	// modules, per publisher and product (kind "cli"). Default nil: CLI
	// versions are not retention's (the size limit alone evicts their
	// archives).
	CLI CLI
	// Interval is how often the rules are applied in the background.
	// Default 10 minutes; negative: only when Prune is called.
	Interval time.Duration
	// EvictNothing has the cache's size limit evict nothing (Evictable),
	// for a dry run that promises to remove nothing on a cache over its
	// limit. Default false.
	EvictNothing bool
	// PinsInterval is how often Pins is asked whether the pins changed.
	// Default 30 seconds.
	PinsInterval time.Duration
	// FlushInterval is how often the last use of versions is written to
	// the cache, in one batch (never on every download). Default 1 minute.
	FlushInterval time.Duration
	// Evictions, when set, are the archives the cache's size limit
	// evicts (it is the cache's cache.Options.OnEvict): a Prune that
	// removes then waits for a pass of the size limit and lists the
	// versions whose archives it evicted since the last one, as removals
	// by RuleSizeLimit; a command's prune (tfmirror cache prune), on a
	// cache the size limit shrinks as it opens. With it, the size limit
	// evicts nothing until a Prune that is not a dry run has made its
	// removals: what it then evicts is what the dry run lists, evicted
	// once the rules' removals were made. Default nil: they are not
	// listed.
	Evictions *Evictions
	// MaxBytes is the cache's size limit (cache.Options.MaxBytes), to say
	// when what may not be evicted alone exceeds it. Default 0: none.
	MaxBytes int64
	// Metrics receives what retention does. Default nil: nothing is
	// recorded.
	Metrics Metrics
}

// Rule names, as Prune and the metrics give them.
const (
	RuleKeepVersions = "keep-versions"
	RuleUnused       = "unused"
	RuleNamed        = "named"
	RuleUnnamed      = "unnamed"
	// RuleSizeLimit is the size limit's (Config.Evictions).
	RuleSizeLimit = "size-limit"
)

// PinSource says which versions are pinned. Package internal/manifest
// implements it for a directory of lock files and sync manifests.
type PinSource interface {
	// Pins returns the pins. changed is false when nothing changed since
	// the previous call (pins is then nil); the first call reports a
	// change.
	Pins() (pins *Pins, changed bool, err error)
}

// Pins are pinned versions: selections per provider, per module and per
// CLI product.
type Pins struct {
	// Providers by address (HOST/NAMESPACE/TYPE).
	Providers map[string][]PinSelection
	// Modules by address (HOST/NAMESPACE/NAME/SYSTEM).
	Modules map[string][]PinSelection
	// CLIs by the product's address (releases.Address:
	// releases.hashicorp.com/hashicorp/terraform,
	// get.opentofu.org/opentofu/tofu).
	CLIs map[string][]PinSelection
	// Skipped, when not empty, says what the source did not read (files
	// beyond its bounds); it is logged as a warning, and shown on the
	// status page (Status.PinsSkipped).
	Skipped string
}

// PinSelection selects pinned versions.
type PinSelection struct {
	// Set is the versions selected.
	Set versions.Set
	// Call, when set, selects in place of Set: a module call's version
	// constraint, read by the clients' rules (manifest.Selection.Call).
	Call *addrs.ModuleCallVersions
	// Latest, when positive, pins only the newest Latest cached versions
	// Set has.
	Latest int
	// Where is the file:line that pinned them.
	Where string
}

// Has reports whether s selects v (Call's rules, or Set's), before
// Latest.
func (s PinSelection) Has(v versions.Version) bool {
	if s.Call != nil {
		return s.Call.Has(v)
	}
	return s.Set.Has(v)
}

// PinnedVersion is a pinned version that the cache has metadata of.
type PinnedVersion struct {
	Kind    string `json:"kind"`    // provider, module or cli
	Address string `json:"address"` // HOST/NAMESPACE/TYPE, HOST/NAMESPACE/NAME/SYSTEM or a CLI product's (Pins.CLIs)
	Version string `json:"version"`
	Where   string `json:"where"` // the pin's file:line
}

// Removal is the removal of one version's packages.
type Removal struct {
	Kind    string `json:"kind"`    // provider, module or cli
	Address string `json:"address"` // HOST/NAMESPACE/TYPE, HOST/NAMESPACE/NAME/SYSTEM or a CLI product's (Pins.CLIs)
	Version string `json:"version"`
	// Rule is why: RuleKeepVersions, RuleUnused, RuleNamed or
	// RuleSizeLimit.
	Rule string `json:"rule"`
	// Archives are the sha256s of the packages removed (those no kept
	// version shares), Bytes their total size.
	Archives []string `json:"archives"`
	Bytes    int64    `json:"bytes"`
	// Unlisted says the version is removed from the version list too: it
	// cannot be fetched again, or one of its archives cannot.
	Unlisted bool `json:"unlisted,omitempty"`
	// Withheld says the withheld import set aside in the version's record
	// (records.PackageRecord.Withheld) is removed too, its archives among
	// Archives: only a prune naming the version removes it.
	Withheld bool `json:"withheld,omitempty"`
}

// Status is what the status page says of retention.
type Status struct {
	// Pinned are the pinned versions the cache has metadata of.
	Pinned []PinnedVersion `json:"pinned"`
	// PinsError is why the pins could not be read ("" if they could; the
	// pins read before are kept).
	PinsError string `json:"pins_error,omitempty"`
	// PinsSkipped says what the pins in force left unread (Pins.Skipped:
	// files nested deeper than the source reads); "" when nothing.
	PinsSkipped string `json:"pins_skipped,omitempty"`
	// KeptBytes are the bytes of cached packages the size limit may not
	// evict (they cannot be fetched again, or are pinned).
	KeptBytes int64 `json:"kept_bytes"`
	// MaxBytes is the size limit; LimitUnmet says KeptBytes exceed it.
	MaxBytes   int64 `json:"max_bytes,omitempty"`
	LimitUnmet bool  `json:"limit_unmet"`
	// LastPass is when the rules last ran (zero: not yet).
	LastPass time.Time `json:"last_pass,omitzero"`
}

// Metrics receives what retention does. Package metrics implements it.
type Metrics interface {
	// RetentionRemoved records the packages of versions removed by rule.
	RetentionRemoved(rule string, versions int, bytes int64)
	// RetentionSharedRemoved records the packages of versions removed by
	// rule from the shared store's bucket.
	RetentionSharedRemoved(rule string, versions int, bytes int64)
	// RetentionKept records the bytes the size limit may not evict, and
	// whether they alone exceed it.
	RetentionKept(bytes int64, limitUnmet bool)
}

// Lister is what retention reads of the engine: the versions it holds.
// *mirror.Inventory implements it.
type Lister interface {
	// ScanVersions calls fn with every version the cache has a record of.
	ScanVersions(fn func(mirrorheld.Record)) error
	// VersionOfRecord is the version of a record of the shared store's
	// bucket (key as in the cache).
	VersionOfRecord(key string, raw json.RawMessage) (mirrorheld.Record, bool)
}

// Remover is how retention lets go of versions that cannot be fetched
// again. *mirror.Inventory implements it.
type Remover interface {
	// RemoveVersion removes a version from its version list, with its
	// record.
	RemoveVersion(kind, address, version string) error
	// DropSetAside removes the withheld import set aside in a provider
	// version's record.
	DropSetAside(address, version string) error
}

// Engine is what retention needs of the engine: its listings, removals,
// configuration (Now, Logger, Offline, Shared) and notifications (Notify,
// which New calls). *mirror.Inventory (Engine.Held) implements it.
type Engine interface {
	Lister
	Remover
	Config() mirror.Config
	Notify(n mirrorheld.Notifier) error
}

// CLI is what retention reads and removes of the CLI release versions the
// cache holds, and is told of them. *releases.Inventory implements it.
type CLI interface {
	// ScanVersions calls fn with every CLI version the cache holds
	// (kind "cli"; Archives are those its SHA256SUMS lists).
	ScanVersions(fn func(mirrorheld.Record)) error
	// RemoveVersion removes a CLI version (kind "cli") that cannot be
	// fetched again, with its SHA256SUMS, once its archives are removed.
	RemoveVersion(kind, address, version string) error
	// Notify makes it tell n which versions it serves (New calls it).
	Notify(n mirrorheld.Notifier) error
}

// Records is where retention keeps the last use of versions: the cache's
// records. *cache.Store implements it.
type Records interface {
	GetMeta(key string, v any) (time.Time, error)
	PutMeta(key string, v any) error
	ScanMeta(prefix string, fn func(key string, storedAt time.Time, raw json.RawMessage) error) error
}

// Blobs is what retention reads and removes of the cache's archives.
// *cache.Store implements it.
type Blobs interface {
	StatBlob(sha string) (cache.BlobInfo, error)
	Stats() (archives int, bytes int64)
	// ScanBlobs calls fn with every archive, in sha256 order.
	ScanBlobs(fn func(sha string, size int64) error) error
	// EvictBlob removes an archive; cache.ErrInUse while a client reads it.
	EvictBlob(sha string) (cache.BlobInfo, error)
	// UnlessInUse runs fn unless one of the archives is read
	// (cache.ErrInUse); it deletes nothing.
	UnlessInUse(shas []string, fn func() error) error
	// SetEvictable sets which archives the size limit may evict.
	SetEvictable(fn func(sha string) bool)
	// EvictNow runs a pass of the size limit and waits until it is over.
	EvictNow(ctx context.Context) error
	// WouldEvict lists what a pass of the size limit would evict, were
	// the archives gone removed first; it removes nothing.
	WouldEvict(gone map[string]int64, may func(sha string) bool) []cache.BlobInfo
	// ReleaseReadPages gives back the pages a pass over every record
	// mapped into the process.
	ReleaseReadPages()
}

// Store is the cache as retention uses it.
type Store interface {
	Records
	Blobs
}

// Shared is the shared store's bucket as retention uses it: the last uses
// of all replicas, and the bucket's records and archives, pruned by the
// one replica that holds the retention lease. The cmd/tfmirror wiring of
// *sharedstore.Store implements it.
type Shared interface {
	// GetMeta returns the record under key and when it was stored; a
	// nil record when there is none, or none that authenticates: for one
	// that does not, the time is when the store wrote it (zero: there is
	// none, or that is not known).
	GetMeta(ctx context.Context, key string) (record json.RawMessage, at time.Time, err error)
	// PutMeta stores record (JSON-encoded) under key.
	PutMeta(ctx context.Context, key string, record any) error
	// TryLease takes the lease named id; a nil lease when another
	// replica holds it.
	TryLease(ctx context.Context, id string) (mirror.SharedLease, error)
	// ListMeta calls fn with the key and the record of every record under
	// prefix that authenticates, read as it is listed, and returns how
	// many it left out for not authenticating: unlike GetMeta, it neither
	// counts nor logs those as rejected, since a pass over the bucket
	// finds them again each time.
	ListMeta(ctx context.Context, prefix string, fn func(key string, record json.RawMessage) error) (unauthenticated int, err error)
	// ListArchives calls fn with the sha256, size and time of storing of
	// every archive.
	ListArchives(ctx context.Context, fn func(sha string, size int64, stored time.Time) error) error
	// DeleteArchive deletes an archive.
	DeleteArchive(ctx context.Context, sha string) error
}

// Retainer applies retention to an engine's cache. Its methods are safe
// for concurrent use.
type Retainer struct {
	cfg     Config
	eng     Engine
	store   Store
	shared  Shared // nil: none
	log     *slog.Logger
	now     func() time.Time
	offline bool

	prot protection // what the size limit may not evict
	uses useLog     // last uses not yet written
	pins pinState

	// beforePrune holds the size limit until a Prune that is not a dry
	// run made its removals (Config.Evictions).
	beforePrune atomic.Bool

	mu      sync.Mutex
	status  Status
	unmet   bool // logged that the limit cannot be met
	pinList []PinnedVersion

	passMu     sync.Mutex // one pass or prune at a time
	lastShared time.Time  // when the bucket was last pruned (the goroutine's)
	unnamed    unnamedSweep
	wake       chan struct{}
	cancel     context.CancelFunc
	done       chan struct{}
}

// New returns the retention of eng's cache store, and of the shared
// store's bucket shared (nil when eng has no shared store: then it must
// be nil, and given when eng has one). It registers with eng for its
// notifications, tells store what may be evicted, and runs the rules and
// the batches of last uses in the background until Close.
func New(cfg Config, eng Engine, store Store, shared Shared) (*Retainer, error) {
	if eng == nil || store == nil {
		return nil, errors.New("retention: an engine and its store are required")
	}
	ecfg := eng.Config()
	if (ecfg.Shared == nil) != (shared == nil) {
		return nil, errors.New("retention: the engine and retention must share the same shared store, or neither have one")
	}
	if cfg.Interval == 0 {
		cfg.Interval = 10 * time.Minute
	}
	if cfg.PinsInterval <= 0 {
		cfg.PinsInterval = 30 * time.Second
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = time.Minute
	}
	r := &Retainer{cfg: cfg, eng: eng, store: store, shared: shared, log: ecfg.Logger, now: ecfg.Now,
		offline: ecfg.Offline, wake: make(chan struct{}, 1), done: make(chan struct{})}
	r.prot.extra = map[[32]byte]struct{}{}
	r.prot.serving = map[[32]byte]struct{}{}
	r.uses.pending = map[string]time.Time{}
	r.pins.src = cfg.Pins
	r.status.MaxBytes = cfg.MaxBytes
	r.beforePrune.Store(cfg.Evictions != nil)
	if err := eng.Notify(r); err != nil {
		return nil, err
	}
	if cfg.CLI != nil {
		if err := cfg.CLI.Notify(r); err != nil {
			return nil, err
		}
	}
	store.SetEvictable(r.Evictable)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go r.loop(ctx)
	return r, nil
}

// Close stops the background work, writes the last uses not written yet
// and returns when done. Call it after the engine's Shutdown, so that the
// uses of the downloads that ended then are written, and before closing
// the store.
func (r *Retainer) Close() {
	r.cancel()
	<-r.done
}

// Status returns what the status page says of retention.
func (r *Retainer) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.status
	st.Pinned = slices.Clone(r.pinList)
	if st.Pinned == nil {
		st.Pinned = []PinnedVersion{}
	}
	if err := r.pins.lastErr(); err != nil {
		st.PinsError = err.Error()
	}
	if pins := r.pins.get(); pins != nil {
		st.PinsSkipped = pins.Skipped
	}
	return st
}

// Evictable reports whether the cache's size limit may evict the archive
// sha: not when a version that cannot be fetched again, or a pinned one,
// needs it; nothing on a sealed mirror; nothing until retention has read
// what the cache holds; nothing while the pins were never read (what
// they pin is not known), as the rules remove nothing then; nothing under
// Config.EvictNothing; with Config.Evictions, nothing before a Prune made
// its removals.
func (r *Retainer) Evictable(sha string) bool {
	return !r.cfg.EvictNothing && !r.beforePrune.Load() && r.mayEvict(sha)
}

// mayEvict is Evictable but for Config.EvictNothing: what the size limit
// would evict of a cache that evicts nothing now (Prune's DryRun).
func (r *Retainer) mayEvict(sha string) bool {
	return !r.offline && r.pins.unread() == nil && r.prot.evictable(sha)
}

// Used records a download of a version (mirrorheld.Notifier); written in
// the next batch, with or without the unused rule: one turned on later
// (or a prune by it) counts the downloads made before.
func (r *Retainer) Used(key string) { r.uses.record(key, r.now()) }

// Serving keeps sha, an archive of version v of address about to be
// served or cached for a sync (mirrorheld.Notifier), from the size limit
// when a pin selects v by its constraint. When only a pin of the newest N
// has v, it asks for a rebuild, which resolves the newest N with v's
// record read (once an archive: latestAsked), and keeps sha from the size
// limit until that rebuild has: an archive fetched meanwhile is not
// evicted before the rebuild finds whether its version is among the
// newest N.
func (r *Retainer) Serving(kind, address string, v versions.Version, sha string) {
	pins := r.pins.get()
	if pins == nil {
		return
	}
	latest := false
	for _, sel := range pins.of(kind, address) {
		if !sel.Has(v) {
			continue
		}
		if sel.Latest <= 0 {
			if r.prot.serve(sha) {
				r.changed() // a rebuild lists it as pinned
			}
			return
		}
		latest = true
	}
	if latest && r.prot.latestAsked(sha) {
		r.changed()
	}
}

// ImportBegun notes an import under way (mirrorheld.Notifier): until it
// ends, what it imports is kept though no record names it.
func (r *Retainer) ImportBegun() { r.prot.begin() }

// Importing keeps sha, an archive an import is about to commit
// (mirrorheld.Notifier), from the size limit and the rules: it cannot be
// fetched again. It waits for a removal of sha by the rules under way.
func (r *Retainer) Importing(sha string) { r.prot.importing(sha) }

// ImportEnded notes that an import ended (mirrorheld.Notifier), and asks
// for a rebuild: records of versions that cannot be fetched again were
// written, and an archive of an import that failed, which none names, is
// kept no longer once a rebuild begun while no import is under way finds
// it named by no record.
func (r *Retainer) ImportEnded() {
	r.prot.end()
	r.changed()
}

// changed asks the background goroutine for a rebuild of what the size
// limit may not evict. It never waits; asks that come while one is
// pending are one.
func (r *Retainer) changed() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}
