package mirror

// Retention: which cached packages the engine keeps, decided per version
// (the engine knows versions, where they came from and which versions
// share an archive) and applied in the background by a goroutine of the
// engine's.
//
// Two things are decided here:
//
//   - what the cache's size limit may evict (Engine.Evictable, which the
//     engine gives the cache): never an archive of a version that cannot
//     be fetched again (imported, signed or not; of a local-only host;
//     anything on a sealed mirror) and never one of a pinned version;
//   - what the rules remove (keep the newest N versions, evict what was
//     not downloaded for D): only versions that can be fetched again and
//     are not pinned; an archive goes only when no kept version needs it.
//
// Only Prune naming versions removes what cannot be fetched again; such
// a version then leaves the cached version list and its record, so that
// it is no longer listed.

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/cache"
	"github.com/tfmirror/tfmirror/discovery"
)

// Retention configures the engine's retention rules (Config.Retention).
// The zero value keeps everything the size limit does not evict, and
// still keeps what cannot be fetched again from the size limit.
type Retention struct {
	// KeepVersions keeps only the newest KeepVersions versions with cached
	// packages of each provider and each module; the packages of older
	// versions are removed. Default 0: no such rule.
	KeepVersions int
	// KeepPerMajor applies KeepVersions to each major version apart.
	// Default false.
	KeepPerMajor bool
	// UnusedAfter removes the packages of versions not downloaded for
	// this long (a version never downloaded counts from when its newest
	// package was cached). Default 0: no such rule.
	UnusedAfter time.Duration
	// Pins, when set, says which versions are pinned: no rule and no size
	// limit removes their packages. Default nil: none.
	Pins PinSource
	// Interval is how often the rules are applied in the background.
	// Default 10 minutes; negative: only when Prune is called.
	Interval time.Duration
	// PinsInterval is how often Pins is asked whether the pins changed.
	// Default 30 seconds.
	PinsInterval time.Duration
	// FlushInterval is how often the last use of versions is written to
	// the cache, in one batch (never on every download). Default 1 minute.
	FlushInterval time.Duration
	// MaxBytes is the cache's size limit (cache.Options.MaxBytes), to say
	// when what may not be evicted alone exceeds it. Default 0: none.
	MaxBytes int64
}

// Rule names, as Prune and the metrics give them.
const (
	RuleKeepVersions = "keep-versions"
	RuleUnused       = "unused"
	RuleNamed        = "named"
)

// PinSource says which versions are pinned. Package internal/manifest
// implements it for a directory of lock files and sync manifests.
type PinSource interface {
	// Pins returns the pins. changed is false when nothing changed since
	// the previous call (pins is then nil); the first call reports a
	// change.
	Pins() (pins *Pins, changed bool, err error)
}

// Pins are pinned versions: selections per provider and per module.
type Pins struct {
	// Providers by address (HOST/NAMESPACE/TYPE).
	Providers map[string][]PinSelection
	// Modules by address (HOST/NAMESPACE/NAME/SYSTEM).
	Modules map[string][]PinSelection
}

// PinSelection selects pinned versions.
type PinSelection struct {
	// Set is the versions selected.
	Set versions.Set
	// Latest, when positive, pins only the newest Latest cached versions
	// Set has.
	Latest int
	// Where is the file:line that pinned them.
	Where string
}

// PinnedVersion is a pinned version that the cache has metadata of.
type PinnedVersion struct {
	Kind    string `json:"kind"`    // provider or module
	Address string `json:"address"` // HOST/NAMESPACE/TYPE or HOST/NAMESPACE/NAME/SYSTEM
	Version string `json:"version"`
	Where   string `json:"where"` // the pin's file:line
}

// Removal is the removal of one version's packages.
type Removal struct {
	Kind    string `json:"kind"`    // provider or module
	Address string `json:"address"` // HOST/NAMESPACE/TYPE or HOST/NAMESPACE/NAME/SYSTEM
	Version string `json:"version"`
	// Rule is why: RuleKeepVersions, RuleUnused or RuleNamed.
	Rule string `json:"rule"`
	// Archives are the sha256s of the packages removed (those no kept
	// version shares), Bytes their total size.
	Archives []string `json:"archives"`
	Bytes    int64    `json:"bytes"`
	// Unlisted says the version is removed from the version list too: it
	// cannot be fetched again.
	Unlisted bool `json:"unlisted,omitempty"`
	// Withheld says the withheld import set aside in the version's record
	// (PackageRecord.Withheld) is removed too, its archives among
	// Archives: only a prune naming the version removes it.
	Withheld bool `json:"withheld,omitempty"`
}

// RetentionStatus is what the status page says of retention.
type RetentionStatus struct {
	// Pinned are the pinned versions the cache has metadata of.
	Pinned []PinnedVersion `json:"pinned"`
	// PinsError is why the pins could not be read ("" if they could; the
	// pins read before are kept).
	PinsError string `json:"pins_error,omitempty"`
	// KeptBytes are the bytes of cached packages the size limit may not
	// evict (they cannot be fetched again, or are pinned).
	KeptBytes int64 `json:"kept_bytes"`
	// MaxBytes is the size limit; LimitUnmet says KeptBytes exceed it.
	MaxBytes   int64 `json:"max_bytes,omitempty"`
	LimitUnmet bool  `json:"limit_unmet"`
	// LastPass is when the rules last ran (zero: not yet).
	LastPass time.Time `json:"last_pass,omitzero"`
}

// RetentionMetrics receives what retention does. Package metrics
// implements it; the engine uses Config.Metrics for it when that
// implements it too.
type RetentionMetrics interface {
	// RetentionRemoved records the packages of versions removed by rule.
	RetentionRemoved(rule string, versions int, bytes int64)
	// RetentionKept records the bytes the size limit may not evict, and
	// whether they alone exceed it.
	RetentionKept(bytes int64, limitUnmet bool)
}

// lastUsePrefix keys the last use of a version: lastuse/package/ADDR/V
// or lastuse/module/ADDR/V.
const lastUsePrefix = "lastuse/"

type lastUseDoc struct {
	At time.Time `json:"at"`
}

// blobEvicter is what retention needs of the store beyond Store:
// *cache.Store implements it. Without it, the rules remove nothing.
type blobEvicter interface {
	EvictBlob(sha string) (cache.BlobInfo, error)
}

// readPagesReleaser is what a rebuild asks of the store once it has read
// every record: *cache.Store implements it.
type readPagesReleaser interface {
	ReleaseReadPages()
}

type evictableSetter interface {
	SetEvictable(fn func(sha string) bool)
}

// retainer is the engine's retention state.
type retainer struct {
	s   *Engine
	cfg Retention

	// protected are the archives the size limit may not evict, sorted
	// (32 bytes an archive: at 100,000 archives, 3 MiB); ready says they
	// were read (until then nothing may be evicted).
	protMu    sync.RWMutex
	protected shaSet
	// extra are archives protected as they were imported or fetched for
	// a pinned version, until a named Prune removes them: a rebuild may
	// have read the records before theirs was written.
	extra map[[32]byte]struct{}
	ready atomic.Bool

	mu      sync.Mutex
	uses    map[string]time.Time // last uses not yet written, by version key
	pins    *Pins
	pinErr  error
	status  RetentionStatus
	unmet   bool // logged that the limit cannot be met
	pinList []PinnedVersion

	pinsOnce   sync.Once  // the first reading of the pins (firstPins)
	passMu     sync.Mutex // one pass or prune at a time
	lastShared time.Time  // when the bucket was last pruned (the goroutine's)
	wake       chan struct{}
	done       chan struct{}
}

func newRetainer(s *Engine, cfg Retention) *retainer {
	if cfg.Interval == 0 {
		cfg.Interval = 10 * time.Minute
	}
	if cfg.PinsInterval <= 0 {
		cfg.PinsInterval = 30 * time.Second
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = time.Minute
	}
	r := &retainer{s: s, cfg: cfg, extra: map[[32]byte]struct{}{}, uses: map[string]time.Time{},
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	r.status.MaxBytes = cfg.MaxBytes
	return r
}

func shaKey(sha string) (k [32]byte, ok bool) {
	n, err := hex.Decode(k[:], []byte(sha))
	return k, err == nil && n == 32
}

// shaSet is a set of sha256s: sorted, without duplicates.
type shaSet [][32]byte

func compareSHA(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) }

// newSHASet makes a set of keys, which it sorts in place.
func newSHASet(keys [][32]byte) shaSet {
	slices.SortFunc(keys, compareSHA)
	return slices.Clip(slices.Compact(keys))
}

func (set shaSet) has(k [32]byte) bool {
	_, found := slices.BinarySearchFunc(set, k, compareSHA)
	return found
}

// Evictable reports whether the cache's size limit may evict the archive
// sha: not when a version that cannot be fetched again, or a pinned one,
// needs it; nothing on a sealed mirror; nothing until the engine has
// read what it holds.
func (s *Engine) Evictable(sha string) bool {
	r := s.ret
	if s.cfg.Offline || !r.ready.Load() {
		return false
	}
	k, ok := shaKey(sha)
	if !ok {
		return true
	}
	r.protMu.RLock()
	kept := r.protected.has(k)
	_, extra := r.extra[k]
	r.protMu.RUnlock()
	return !kept && !extra
}

// protect keeps sha from the size limit; it reports whether sha was
// not kept yet.
func (r *retainer) protect(sha string) bool {
	k, ok := shaKey(sha)
	if !ok {
		return false
	}
	r.protMu.Lock()
	defer r.protMu.Unlock()
	_, had := r.extra[k]
	kept := r.protected.has(k)
	r.extra[k] = struct{}{}
	return !had && !kept
}

// protectIfPinned keeps sha, an archive of version v of addr (kind
// provider or module) about to be fetched, from the size limit when a
// pin selects v (by its constraint; pins of the newest N are resolved by
// the next rebuild).
func (r *retainer) protectIfPinned(kind, addr string, v versions.Version, sha string) {
	r.mu.Lock()
	pins := r.pins
	r.mu.Unlock()
	if pins == nil {
		return
	}
	sels := pins.Providers[addr]
	if kind == "module" {
		sels = pins.Modules[addr]
	}
	for _, sel := range sels {
		if sel.Latest <= 0 && sel.Set.Has(v) {
			if r.protect(sha) {
				r.changed() // a rebuild lists it as pinned
			}
			return
		}
	}
}

// used records a download of a version (key: package/ADDR/V or
// module/ADDR/V); written in the next batch.
func (r *retainer) used(key string) {
	if r.cfg.UnusedAfter <= 0 {
		return
	}
	now := r.s.cfg.Now()
	r.mu.Lock()
	r.uses[key] = now
	r.mu.Unlock()
}

// flush writes the last uses recorded since the previous flush.
func (r *retainer) flush() {
	r.mu.Lock()
	uses := r.uses
	r.uses = map[string]time.Time{}
	r.mu.Unlock()
	var failed int
	for key, at := range uses {
		if err := r.s.store.PutMeta(lastUsePrefix+key, lastUseDoc{At: at}); err != nil {
			failed++
			r.mu.Lock()
			if _, newer := r.uses[key]; !newer {
				r.uses[key] = at // tried again next time
			}
			r.mu.Unlock()
		}
	}
	if failed > 0 {
		r.s.log.Warn("the last use of versions could not be written; tried again later", "versions", failed)
	}
	r.shareUses(uses)
}

// sharedUseTimeout bounds the shared tier's calls for one batch of last
// uses, or for the candidates of one pass.
const sharedUseTimeout = 30 * time.Second

// shareUses writes last uses to the shared tier (Config.Shared), unless
// another replica wrote a later one, so that the unused rule of every
// replica counts the downloads of all. A failing tier is logged; each
// replica's own record still counts for it.
func (r *retainer) shareUses(uses map[string]time.Time) {
	tier := r.s.cfg.Shared
	if tier == nil || len(uses) == 0 || r.cfg.UnusedAfter <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedUseTimeout)
	defer cancel()
	for key, at := range uses {
		if theirs, ok := r.sharedUse(ctx, key); ok && !theirs.Before(at) {
			continue
		}
		if err := tier.PutMeta(ctx, lastUsePrefix+key, lastUseDoc{At: at}); err != nil {
			r.s.log.Warn("writing the last use of versions to the shared store; other replicas may not count them", "error", err)
			return
		}
	}
}

// sharedUse returns the last use of key that the shared tier holds.
func (r *retainer) sharedUse(ctx context.Context, key string) (time.Time, bool) {
	raw, _, err := r.s.cfg.Shared.GetMeta(ctx, lastUsePrefix+key)
	if err != nil || raw == nil {
		return time.Time{}, false
	}
	var doc lastUseDoc
	if json.Unmarshal(raw, &doc) != nil {
		return time.Time{}, false
	}
	return doc.At, true
}

// start runs the retention goroutine until the engine's context ends.
func (r *retainer) start() {
	go r.loop(r.s.root)
}

// stop waits for the goroutine, which the engine's context ends.
func (r *retainer) stop() { <-r.done }

func (r *retainer) loop(ctx context.Context) {
	defer close(r.done)
	defer r.flush()
	r.firstPins()
	r.rebuild()
	// The first rebuild read every package record: garbage in proportion
	// to the cache, which the Go runtime would keep for minutes.
	debug.FreeOSMemory()
	rules := (r.cfg.KeepVersions > 0 || r.cfg.UnusedAfter > 0) && r.cfg.Interval > 0
	pass := time.NewTicker(max(r.cfg.Interval, time.Hour))
	if rules {
		pass.Reset(r.cfg.Interval)
	}
	defer pass.Stop()
	pins := time.NewTicker(r.cfg.PinsInterval)
	defer pins.Stop()
	flush := time.NewTicker(r.cfg.FlushInterval)
	defer flush.Stop()
	if rules {
		r.apply(ctx)
	}
	var lastWoken time.Time    // the last rebuild a wake asked for
	var again <-chan time.Time // a wake that came within rebuildGap of it
	for {
		select {
		case <-ctx.Done():
			return
		case <-pass.C:
			if rules {
				r.apply(ctx)
			}
		case <-r.wake:
			// Rebuilds asked for in a row (an import of many versions)
			// run at most every rebuildGap: each reads every record.
			if wait := rebuildGap - time.Since(lastWoken); wait > 0 {
				if again == nil {
					again = time.After(wait)
				}
				continue
			}
			lastWoken = time.Now()
			r.rebuild()
		case <-again:
			again, lastWoken = nil, time.Now()
			r.rebuild()
		case <-pins.C:
			if r.readPins() {
				r.rebuild()
			}
		case <-flush.C:
			r.flush()
		}
	}
}

// apply runs the rules once, in the background: on the cache, and at
// most every sharedPruneEvery on the shared store's bucket.
func (r *retainer) apply(ctx context.Context) {
	r.flush()
	if _, err := r.s.Prune(ctx, PruneRequest{}); err != nil && ctx.Err() == nil {
		r.s.log.Warn("applying the retention rules", "error", err)
	}
	if now := r.s.cfg.Now(); r.s.cfg.Shared != nil && now.Sub(r.lastShared) >= sharedPruneEvery {
		r.lastShared = now
		if _, err := r.pruneShared(ctx); err != nil && ctx.Err() == nil {
			r.s.log.Warn("applying the retention rules to the shared store", "error", err)
		}
	}
}

// rebuildGap is the least time between two rebuilds that wakes ask for.
const rebuildGap = time.Second

// changed asks the retention goroutine for a rebuild: records of
// versions that cannot be fetched again (imports) were written. It never
// waits; asks that come while one is pending are one.
func (r *retainer) changed() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// firstPins reads the pins once, for whichever needs them first: the
// retention goroutine's first rebuild, or a Prune called before it (a
// `cache prune` on the data directory runs at once).
func (r *retainer) firstPins() { r.pinsOnce.Do(func() { r.readPins() }) }

// readPins asks the pin source for changes; it reports whether the pins
// changed.
func (r *retainer) readPins() bool {
	if r.cfg.Pins == nil {
		return false
	}
	pins, changed, err := r.cfg.Pins.Pins()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		if r.pinErr == nil || r.pinErr.Error() != err.Error() {
			r.s.log.Error("reading the pins; the pins read before are kept", "error", err)
		}
		r.pinErr = err
		return false
	}
	r.pinErr = nil
	if changed {
		r.pins = pins
	}
	return changed
}

// pinnedBy returns the pin's file:line when version v of addr (kind
// provider or module) is pinned; cached are addr's cached versions, for
// selections of the newest N.
func pinnedBy(sels []PinSelection, v versions.Version, cached versions.List) (string, bool) {
	for _, sel := range sels {
		if !sel.Set.Has(v) {
			continue
		}
		if sel.Latest <= 0 {
			return sel.Where, true
		}
		newer := 0
		for _, c := range cached {
			if sel.Set.Has(c) && c.GreaterThan(v) {
				newer++
			}
		}
		if newer < sel.Latest {
			return sel.Where, true
		}
	}
	return "", false
}

// heldVersion is one cached version as retention sees it.
type heldVersion struct {
	kind, addr string
	version    versions.Version
	raw        string // the version as keyed (modules: the origin's spelling)
	key        string // package/ADDR/V or module/ADDR/V
	archives   []string
	cached     map[string]int64 // cached archives and their sizes
	keptCached map[string]int64 // cached archives of kept and their sizes
	newest     time.Time        // when the newest cached archive was stored
	refetch    bool             // can be fetched again
	pinnedBy   string           // the pin's file:line, "" when not pinned
	imported   bool
	// kept are archives of the record that are kept whatever the rules
	// and the size limit do with the version: a withheld import's set
	// aside in it (PackageRecord.Withheld), which cannot be fetched
	// again. A prune naming the version removes them.
	kept []string
}

// recordSummary is what retention reads of a PackageRecord: not the
// evidence documents.
type recordSummary struct {
	Schema   int    `json:"schema"`
	Version  string `json:"version"`
	Archives map[string]struct {
		SHA256 string `json:"sha256"`
	} `json:"archives"`
	Provenance Provenance `json:"provenance,omitempty"`
	Withheld   *struct {
		Archives map[string]struct {
			SHA256 string `json:"sha256"`
		} `json:"archives"`
	} `json:"withheld,omitempty"`
}

// packageSummary decodes raw, the package record stored under key, and
// the provider the key names; false for what is not a package record of
// a known schema.
func packageSummary(key string, raw json.RawMessage) (discovery.Provider, recordSummary, bool) {
	var rec recordSummary
	if json.Unmarshal(raw, &rec) != nil || !knownSchema(rec.Schema) {
		return discovery.Provider{}, rec, false
	}
	p, ok := parseProviderKey(strings.TrimSuffix(strings.TrimPrefix(key, "package/"), "/"+rec.Version))
	return p, rec, ok
}

// scanHeld calls fn for every version the engine has a record of (of
// providers and modules), without its pin; fn may keep h. With stat, it
// asks the store which of each version's archives are cached (h.cached,
// h.newest); without, those are left empty.
func (r *retainer) scanHeld(withStat bool, fn func(h *heldVersion)) error {
	s := r.s
	stat := func(h *heldVersion) {
		if !withStat {
			return
		}
		h.cached = map[string]int64{}
		for _, sha := range h.archives {
			if info, err := s.store.StatBlob(sha); err == nil {
				h.cached[sha] = info.Size
				if info.Created.After(h.newest) {
					h.newest = info.Created
				}
			}
		}
		if len(h.kept) > 0 {
			h.keptCached = map[string]int64{}
			for _, sha := range h.kept {
				if info, err := s.store.StatBlob(sha); err == nil {
					h.keptCached[sha] = info.Size
				}
			}
		}
	}
	for _, prefix := range []string{"package/", "module/"} {
		err := s.store.ScanMeta(prefix, func(key string, _ time.Time, raw json.RawMessage) error {
			if h := r.heldRecord(key, raw); h != nil {
				stat(h)
				fn(h)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// heldRecord is the version of the record raw stored under key (of the
// cache or the shared store's bucket), without its cached archives; nil
// for a record that is not one.
func (r *retainer) heldRecord(key string, raw json.RawMessage) *heldVersion {
	s := r.s
	switch {
	case strings.HasPrefix(key, "package/"):
		p, rec, ok := packageSummary(key, raw)
		if !ok {
			return nil
		}
		v, err := ParseSemver(rec.Version)
		if err != nil {
			return nil
		}
		h := &heldVersion{kind: "provider", addr: p.String(), version: v, raw: rec.Version, key: key,
			imported: rec.Provenance != ProvenanceOrigin}
		for _, pl := range sortedKeys(rec.Archives) {
			h.archives = append(h.archives, rec.Archives[pl].SHA256)
		}
		if rec.Withheld != nil {
			for _, pl := range sortedKeys(rec.Withheld.Archives) {
				h.kept = append(h.kept, rec.Withheld.Archives[pl].SHA256)
			}
		}
		h.refetch = !s.cfg.Offline && !h.imported && !s.local(p.Hostname)
		return h
	case strings.HasPrefix(key, "module/"):
		var rec ModuleRecord
		if json.Unmarshal(raw, &rec) != nil || !knownSchema(rec.Schema) || rec.SHA256 == "" {
			return nil
		}
		v, err := versions.ParseVersion(strings.TrimPrefix(rec.Version, "v"))
		if err != nil {
			return nil
		}
		// An imported module version (from a bundle, or a local module
		// without origin location) is not fetched again, as imported
		// providers are not.
		h := &heldVersion{kind: "module", addr: rec.Module, version: v, raw: rec.Version, key: key,
			archives: []string{rec.SHA256}, imported: rec.Provenance != ProvenanceOrigin}
		h.refetch = !s.cfg.Offline && !h.imported && rec.Location != ""
		return h
	}
	return nil
}

// currentPins returns the pins, and whether a selection of the newest N
// needs every cached version to be resolved.
func (r *retainer) currentPins() (pins *Pins, latest bool) {
	r.mu.Lock()
	pins = r.pins
	r.mu.Unlock()
	if pins == nil {
		return nil, false
	}
	for _, m := range []map[string][]PinSelection{pins.Providers, pins.Modules} {
		for _, sels := range m {
			for _, sel := range sels {
				latest = latest || sel.Latest > 0
			}
		}
	}
	return pins, latest
}

func pinSelections(pins *Pins, h *heldVersion) []PinSelection {
	if pins == nil {
		return nil
	}
	if h.kind == "module" {
		return pins.Modules[h.addr]
	}
	return pins.Providers[h.addr]
}

// holdings reads every version the engine has a record of, with the
// pins applied.
func (r *retainer) holdings() ([]*heldVersion, error) {
	var out []*heldVersion
	if err := r.scanHeld(true, func(h *heldVersion) { out = append(out, h) }); err != nil {
		return nil, err
	}
	r.applyPins(out)
	return out, nil
}

// applyPins sets each version's pinnedBy from the current pins; a pin's
// "latest" selections count among the versions of held that are cached.
func (r *retainer) applyPins(held []*heldVersion) {
	pins, _ := r.currentPins()
	if pins == nil {
		return
	}
	cached := map[string]versions.List{}
	for _, h := range held {
		if len(h.cached) > 0 {
			cached[h.kind+" "+h.addr] = append(cached[h.kind+" "+h.addr], h.version)
		}
	}
	for _, h := range held {
		h.pinnedBy, _ = pinnedBy(pinSelections(pins, h), h.version, cached[h.kind+" "+h.addr])
	}
}

// rebuild recomputes what the size limit may not evict and the pinned
// versions, and says when what is kept exceeds the limit. Unless pins
// select the newest N versions, it reads the records one at a time,
// keeping none: what it keeps is the sorted set of protected archives
// (32 bytes each), whose sizes it then reads in one ordered pass.
func (r *retainer) rebuild() {
	// The database's pages that hold the records, which the pass maps
	// into the process, are given back at the end.
	if rp, ok := r.s.store.(readPagesReleaser); ok {
		defer rp.ReleaseReadPages()
	}
	r.protMu.RLock()
	keys := make([][32]byte, 0, len(r.protected)+len(r.extra)) // as many as last time, most often
	// extra's archives whose records are read: those records decide now.
	extra := make(map[[32]byte]bool, len(r.extra))
	for k := range r.extra {
		extra[k] = false
	}
	r.protMu.RUnlock()
	var pinList []PinnedVersion
	visit := func(h *heldVersion) {
		if h.pinnedBy != "" {
			pinList = append(pinList, PinnedVersion{Kind: h.kind, Address: h.addr, Version: h.raw, Where: h.pinnedBy})
		}
		keep := !h.refetch || h.pinnedBy != ""
		for i, sha := range slices.Concat(h.archives, h.kept) {
			k, ok := shaKey(sha)
			if !ok {
				continue
			}
			if _, ok := extra[k]; ok {
				extra[k] = true
			}
			if keep || i >= len(h.archives) {
				keys = append(keys, k)
			}
		}
	}
	pins, latest := r.currentPins()
	var err error
	if latest {
		var held []*heldVersion
		if held, err = r.holdings(); err == nil {
			for _, h := range held {
				visit(h)
			}
		}
	} else {
		err = r.scanHeld(false, func(h *heldVersion) {
			h.pinnedBy, _ = pinnedBy(pinSelections(pins, h), h.version, nil)
			visit(h)
		})
	}
	if err != nil {
		r.s.log.Warn("reading the cache for retention; what may be evicted is not updated", "error", err)
		return
	}
	protected := newSHASet(keys)
	var kept int64
	if r.s.cfg.Offline {
		_, kept = r.s.store.Stats()
	} else if kept, err = r.cachedBytes(protected); err != nil {
		r.s.log.Warn("reading the sizes of the archives kept from the size limit; their total is not updated", "error", err)
		r.mu.Lock()
		kept = r.status.KeptBytes
		r.mu.Unlock()
	}
	r.protMu.Lock()
	r.protected = protected
	// Archives kept as they were imported or fetched for a pin are now
	// decided by their records.
	for k, read := range extra {
		if read {
			delete(r.extra, k)
		}
	}
	r.protMu.Unlock()
	r.ready.Store(true)
	if es, ok := r.s.store.(evictableSetter); ok {
		es.SetEvictable(r.s.Evictable) // and a pass of the size limit, with what may go now
	}

	unmet := r.cfg.MaxBytes > 0 && kept > r.cfg.MaxBytes
	r.mu.Lock()
	r.pinList = pinList
	r.status.KeptBytes, r.status.LimitUnmet = kept, unmet
	was := r.unmet
	r.unmet = unmet
	r.mu.Unlock()
	if unmet && !was {
		r.s.log.Warn("the cache size limit cannot be met: the packages that cannot be fetched again and the pinned ones alone exceed it, and are kept",
			"kept_bytes", kept, "max_bytes", r.cfg.MaxBytes)
	}
	if rm, ok := r.s.cfg.Metrics.(RetentionMetrics); ok {
		rm.RetentionKept(kept, unmet)
	}
}

// blobScanner is what cachedBytes uses of the store when it has it:
// *cache.Store implements it.
type blobScanner interface {
	ScanBlobs(fn func(sha string, size int64) error) error
}

// errScanned stops a ScanBlobs that has seen what it needed.
var errScanned = errors.New("scanned")

// cachedBytes returns the total size of the archives of set that are
// cached. A set that is a fair part of the cache is sized in one ordered
// pass over the archives' records, which costs far less than as many
// lookups (and leaves StatBlob's memo to the requests); a small one by a
// lookup each.
func (r *retainer) cachedBytes(set shaSet) (int64, error) {
	var total int64
	if len(set) == 0 {
		return 0, nil
	}
	bs, ok := r.s.store.(blobScanner)
	if archives, _ := r.s.store.Stats(); !ok || len(set) < archives/16 {
		for _, k := range set {
			if info, err := r.s.store.StatBlob(hex.EncodeToString(k[:])); err == nil {
				total += info.Size
			}
		}
		return total, nil
	}
	i := 0
	err := bs.ScanBlobs(func(sha string, size int64) error {
		k, ok := shaKey(sha)
		if !ok {
			return nil
		}
		for i < len(set) && compareSHA(set[i], k) < 0 {
			i++
		}
		if i == len(set) {
			return errScanned
		}
		if set[i] == k {
			total += size
		}
		return nil
	})
	if err != nil && !errors.Is(err, errScanned) {
		return 0, err
	}
	return total, nil
}

// RetentionStatus returns what the status page says of retention.
func (s *Engine) RetentionStatus() RetentionStatus {
	r := s.ret
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.status
	st.Pinned = slices.Clone(r.pinList)
	if st.Pinned == nil {
		st.Pinned = []PinnedVersion{}
	}
	if r.pinErr != nil {
		st.PinsError = r.pinErr.Error()
	}
	return st
}

// PruneRequest asks Prune what to remove.
type PruneRequest struct {
	// DryRun lists what would be removed and removes nothing.
	DryRun bool
	// Provider or Module, with Versions, name versions to remove: then
	// only those are removed, whatever the rules and the pins say,
	// including versions that cannot be fetched again (which leave the
	// version list) and a withheld import set aside in a version's
	// record. Both nil: the rules (Config.Retention) decide.
	Provider *discovery.Provider
	Module   *discovery.Module
	Versions []string
}

// errNothingNamed is Prune's answer for a version the cache does not hold.
func errNothingNamed(what, version string) error {
	return fmt.Errorf("%w: the cache holds no version %s of %s", ErrVersionNotFound, version, what)
}

// Prune removes (or with DryRun, lists) what the retention rules would
// remove now, or the versions req names. An archive is removed only when
// no version kept needs it, and never while a client reads it (it is then
// left for the next pass, and not listed as removed). It returns the
// removals made, or that would be made.
func (s *Engine) Prune(ctx context.Context, req PruneRequest) ([]Removal, error) {
	r := s.ret
	r.firstPins()
	r.passMu.Lock()
	defer r.passMu.Unlock()
	held, err := r.holdings()
	if err != nil {
		return nil, err
	}
	var removed map[*heldVersion]string
	if req.Provider != nil || req.Module != nil {
		removed, err = r.named(held, req)
	} else {
		removed = r.byRules(held)
	}
	if err != nil {
		return nil, err
	}
	plan := r.plan(held, removed)
	if req.DryRun {
		return plan, nil
	}
	if req.Provider == nil && req.Module == nil {
		r.mu.Lock()
		r.status.LastPass = s.cfg.Now().UTC()
		r.mu.Unlock()
	}
	done, err := r.remove(ctx, plan)
	r.rebuild()
	return done, err
}

// plan is the removal of the versions removed (with their rule): of
// their cached archives, those no version kept needs.
func (r *retainer) plan(held []*heldVersion, removed map[*heldVersion]string) []Removal {
	var plan []Removal
	// What kept versions need stays, and the withheld imports set aside
	// in the records of versions the rules remove: only a prune naming
	// the version removes them.
	needed := map[string]bool{}
	for _, h := range held {
		rule, gone := removed[h]
		if !gone {
			for _, sha := range h.archives {
				needed[sha] = true
			}
		}
		if !gone || rule != RuleNamed {
			for _, sha := range h.kept {
				needed[sha] = true
			}
		}
	}
	taken := map[string]bool{}
	for _, h := range held {
		rule, gone := removed[h]
		if !gone {
			continue
		}
		rm := Removal{Kind: h.kind, Address: h.addr, Version: h.raw, Rule: rule, Archives: []string{},
			Unlisted: rule == RuleNamed && !h.refetch, Withheld: rule == RuleNamed && len(h.kept) > 0}
		archives := h.archives
		if rm.Withheld {
			archives = slices.Concat(h.archives, h.kept)
		}
		for _, sha := range archives {
			size, cached := h.cached[sha]
			if !cached {
				size, cached = h.keptCached[sha]
			}
			if !cached || needed[sha] || taken[sha] {
				continue
			}
			taken[sha] = true
			rm.Archives = append(rm.Archives, sha)
			rm.Bytes += size
		}
		if len(rm.Archives) == 0 && !rm.Unlisted && !rm.Withheld {
			continue
		}
		plan = append(plan, rm)
	}
	slices.SortFunc(plan, func(a, b Removal) int {
		return strings.Compare(a.Kind+" "+a.Address+" "+a.Version, b.Kind+" "+b.Address+" "+b.Version)
	})
	return plan
}

// byRules picks the versions the rules remove, with the rule.
func (r *retainer) byRules(held []*heldVersion) map[*heldVersion]string {
	out := map[*heldVersion]string{}
	if k := r.cfg.KeepVersions; k > 0 {
		groups := map[string][]*heldVersion{}
		for _, h := range held {
			if len(h.cached) == 0 {
				continue
			}
			g := h.kind + " " + h.addr
			if r.cfg.KeepPerMajor {
				g += fmt.Sprintf(" %d", h.version.Major)
			}
			groups[g] = append(groups[g], h)
		}
		for _, g := range groups {
			slices.SortFunc(g, func(a, b *heldVersion) int {
				switch {
				case a.version.GreaterThan(b.version):
					return -1
				case b.version.GreaterThan(a.version):
					return 1
				}
				return 0
			})
			for _, h := range g[min(k, len(g)):] {
				if h.refetch && h.pinnedBy == "" {
					out[h] = RuleKeepVersions
				}
			}
		}
	}
	if d := r.cfg.UnusedAfter; d > 0 {
		last := r.lastUses()
		now := r.s.cfg.Now()
		for _, h := range held {
			if _, ok := out[h]; ok || len(h.cached) == 0 || !h.refetch || h.pinnedBy != "" {
				continue
			}
			at, ok := last[h.key]
			if !ok {
				at = h.newest
			}
			if now.Sub(at) < d {
				continue
			}
			if r.s.cfg.Shared != nil { // a download on another replica counts
				ctx, cancel := context.WithTimeout(context.Background(), sharedUseTimeout)
				theirs, ok := r.sharedUse(ctx, h.key)
				cancel()
				if ok && now.Sub(theirs) < d {
					continue
				}
			}
			out[h] = RuleUnused
		}
	}
	return out
}

// lastUses returns the last use of every version that has one: written
// ones, and those not written yet.
func (r *retainer) lastUses() map[string]time.Time {
	last := map[string]time.Time{}
	r.s.store.ScanMeta(lastUsePrefix, func(key string, _ time.Time, raw json.RawMessage) error {
		var doc lastUseDoc
		if json.Unmarshal(raw, &doc) == nil {
			last[strings.TrimPrefix(key, lastUsePrefix)] = doc.At
		}
		return nil
	})
	r.mu.Lock()
	for k, at := range r.uses {
		if at.After(last[k]) {
			last[k] = at
		}
	}
	r.mu.Unlock()
	return last
}

// named picks the versions req names.
func (r *retainer) named(held []*heldVersion, req PruneRequest) (map[*heldVersion]string, error) {
	kind, addr := "provider", ""
	if req.Provider != nil {
		addr = req.Provider.String()
	} else {
		kind, addr = "module", req.Module.String()
	}
	if len(req.Versions) == 0 {
		return nil, errNothingNamed(kind+" "+addr, "(none named)")
	}
	out := map[*heldVersion]string{}
	for _, want := range req.Versions {
		found := false
		for _, h := range held {
			if h.kind != kind || h.addr != addr {
				continue
			}
			if v, err := versions.ParseVersion(strings.TrimPrefix(want, "v")); err == nil && v.Same(h.version) || want == h.raw {
				out[h] = RuleNamed
				found = true
			}
		}
		if !found {
			return nil, errNothingNamed(kind+" "+addr, want)
		}
	}
	return out, nil
}

// remove applies plan: deletes its archives (not those a client has
// open), and unlists the versions that cannot be fetched again. It
// returns what was removed.
func (r *retainer) remove(ctx context.Context, plan []Removal) ([]Removal, error) {
	s := r.s
	ev, ok := s.store.(blobEvicter)
	if !ok {
		return nil, errors.New("this cache cannot remove archives")
	}
	var done []Removal
	type tally struct {
		versions int
		bytes    int64
	}
	byRule := map[string]*tally{}
	for _, rm := range plan {
		if ctx.Err() != nil {
			break
		}
		got := rm
		got.Archives, got.Bytes = []string{}, 0
		busy := false
		for _, sha := range rm.Archives {
			info, err := ev.EvictBlob(sha)
			switch {
			case err == nil:
				got.Archives = append(got.Archives, sha)
				got.Bytes += info.Size
				if k, ok := shaKey(sha); ok {
					r.protMu.Lock()
					delete(r.extra, k)
					r.protMu.Unlock()
				}
			case errors.Is(err, cache.ErrNotFound):
			case errors.Is(err, cache.ErrInUse):
				busy = true
			default:
				s.log.Warn("removing an archive", "sha256", sha, "error", err)
				busy = true
			}
		}
		if busy {
			s.log.Info("an archive of a version being removed is in use; it is removed by a later pass",
				"kind", rm.Kind, "address", rm.Address, "version", rm.Version)
		}
		switch {
		case busy:
			got.Unlisted, got.Withheld = false, false
		case rm.Unlisted:
			// The record goes, with the import set aside in it.
			if err := r.unlist(rm); err != nil {
				s.log.Warn("removing a version from the version list", "kind", rm.Kind, "address", rm.Address, "version", rm.Version, "error", err)
				got.Unlisted, got.Withheld = false, false
			}
		case rm.Withheld:
			if err := r.dropWithheld(rm); err != nil {
				s.log.Warn("removing the withheld import from a version's record", "address", rm.Address, "version", rm.Version, "error", err)
				got.Withheld = false
			}
		}
		if len(got.Archives) == 0 && !got.Unlisted && !got.Withheld {
			continue
		}
		done = append(done, got)
		t := byRule[rm.Rule]
		if t == nil {
			t = &tally{}
			byRule[rm.Rule] = t
		}
		t.versions++
		t.bytes += got.Bytes
		s.log.Info("removed the packages of a version", "rule", rm.Rule, "kind", rm.Kind, "address", rm.Address,
			"version", rm.Version, "bytes", got.Bytes, "unlisted", got.Unlisted, "withheld_import", got.Withheld)
	}
	if rm, ok := s.cfg.Metrics.(RetentionMetrics); ok {
		for rule, t := range byRule {
			rm.RetentionRemoved(rule, t.versions, t.bytes)
		}
	}
	return done, ctx.Err()
}

// unlist removes a version that cannot be fetched again from its version
// list and deletes its record, so that it is no longer listed.
func (r *retainer) unlist(rm Removal) error {
	s := r.s
	s.importMu.Lock() // not while an import writes the same list
	defer s.importMu.Unlock()
	if rm.Kind == "module" {
		m, err := discovery.ParseModule(rm.Address)
		if err != nil {
			return err
		}
		key := moduleRecordKey(m, rm.Version)
		err = s.store.DeleteMeta(key)
		s.memo.forget(key)
		return err
	}
	p, ok := parseProviderKey(rm.Address)
	if !ok {
		return fmt.Errorf("provider address %q", rm.Address)
	}
	v, err := ParseSemver(rm.Version)
	if err != nil {
		return err
	}
	key := versionsKey(p)
	if list, _, err := s.cachedVersions(key); err == nil {
		nl := &VersionList{Schema: list.Schema, Imported: list.Imported}
		for _, e := range list.Versions {
			if e.Version != v.String() {
				nl.Versions = append(nl.Versions, e)
			}
		}
		if nl.Versions == nil {
			nl.Versions = []VersionEntry{}
		}
		err := s.store.PutMeta(key, nl)
		s.memo.forget(key)
		if err != nil {
			return err
		}
	}
	pkey := packageKey(p, v)
	err = s.store.DeleteMeta(pkey)
	s.memo.forget(pkey)
	if err == nil {
		s.forgetWithheld(p, rm.Version)
	}
	return err
}

// dropWithheld removes the withheld import set aside in the record of the
// provider version rm names, whose archives rm removed: the record stays
// the origin's, without it.
func (r *retainer) dropWithheld(rm Removal) error {
	s := r.s
	s.importMu.Lock() // as unlist
	defer s.importMu.Unlock()
	p, ok := parseProviderKey(rm.Address)
	if !ok {
		return fmt.Errorf("provider address %q", rm.Address)
	}
	v, err := ParseSemver(rm.Version)
	if err != nil {
		return err
	}
	key := packageKey(p, v)
	var rec PackageRecord
	if _, err := s.store.GetMeta(key, &rec); err != nil {
		return err
	}
	if rec.Withheld != nil {
		rec.Withheld = nil
		err = s.store.PutMeta(key, &rec)
		s.memo.forget(key)
		if err != nil {
			return err
		}
	}
	s.forgetWithheld(p, rm.Version)
	return nil
}

// parseProviderKey parses HOST/NAMESPACE/TYPE as the engine writes it in
// its keys.
func parseProviderKey(s string) (discovery.Provider, bool) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
		return discovery.Provider{}, false
	}
	h, err := svchost.ForComparison(parts[0])
	if err != nil {
		return discovery.Provider{}, false
	}
	return discovery.Provider{Hostname: h, Namespace: parts[1], Type: parts[2]}, true
}
