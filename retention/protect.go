package retention

// What the cache's size limit may not evict: the archives that cannot be
// fetched again (of versions that cannot be, and those an import added to
// a version that can: inventory.Record.Refetchable) and of pinned
// versions, recomputed by a rebuild from the engine's records; and,
// until a rebuild has resolved them, those served for a version a pin of
// the newest N may select.

import (
	"bytes"
	"encoding/hex"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
)

// protection is the set of archives the size limit may not evict.
type protection struct {
	mu sync.RWMutex
	// set are the archives kept, sorted (32 bytes an archive: at 100,000
	// archives, 3 MiB).
	set shaSet
	// extra are archives protected as they were imported or fetched for
	// a pinned version, until a named Prune removes them or a rebuild
	// reads a record that keeps them: a rebuild may have read the records
	// before theirs was written. One an import protected that no record
	// keeps goes at a rebuild begun once its import ended (quiet).
	extra map[[32]byte]struct{}
	// serving are the extra archives protected as they were served for a
	// pinned version (Retainer.Serving), which only a record or a named
	// Prune takes out of extra.
	serving map[[32]byte]struct{}
	// imports counts the imports under way (begin, end), begun those
	// begun since the start: a rebuild's snapshot with no import under
	// way, and none begun by the time it replaces the set, read every
	// record the imports that protected extra archives wrote.
	imports int
	begun   uint64
	// ready says set was read (until then nothing may be evicted).
	ready atomic.Bool
	// gen counts the replacements of set (replace).
	gen uint64
	// imported are the archives imports protected since a named prune
	// began removing a version (watch), until it ended (nil: none is):
	// an import may name one after the prune read the records.
	imported map[[32]byte]struct{}
	// asked are the archives not kept that Serving asked a rebuild for,
	// of versions a pin of the newest N has (latestAsked), at most
	// maxAsked.
	asked map[[32]byte]struct{}
	// latest are the archives of asked that no rebuild begun since they
	// were asked for has read the records for yet: kept from the size
	// limit until one has, which keeps them (set) when their version is
	// among the newest N, and lets them go when it is not.
	latest map[[32]byte]struct{}
	// removing is held by a removal while it checks that an archive is
	// not kept and deletes it (removeUnless, for the rules' removeUnkept
	// and a named prune's removeUnnamed), and by an import while it protects its archive
	// (importing): an import that found the archive cached before the
	// removal deleted it, and then wrote a record naming it, would leave
	// that record without its archive. The lock order: an import holds
	// the engine's locks (its import lock, or the CLI releases' import
	// lock) when it takes removing, so
	// removing is never held across a call into the engine (a named
	// prune removes the version's record, and reads the records again,
	// before it takes removing); within it, only the cache's deletion
	// (EvictBlob) and mu are taken, never removing within mu. Never held
	// while the cache's size limit asks evictable.
	removing sync.Mutex
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

// evictable reports whether sha is neither kept, nor extra, nor waiting
// for a rebuild to resolve the newest N (latest), once the set was read.
func (p *protection) evictable(sha string) bool {
	if !p.ready.Load() {
		return false
	}
	k, ok := shaKey(sha)
	if !ok {
		return true
	}
	p.mu.RLock()
	kept := p.set.has(k)
	_, extra := p.extra[k]
	_, latest := p.latest[k]
	p.mu.RUnlock()
	return !kept && !extra && !latest
}

// protect keeps sha from the size limit; it reports whether sha was
// not kept yet.
func (p *protection) protect(sha string) bool {
	k, ok := shaKey(sha)
	if !ok {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, had := p.extra[k]
	kept := p.set.has(k)
	p.extra[k] = struct{}{}
	return !had && !kept
}

// serve protects sha, an archive served for a pinned version, as protect
// does; it reports whether sha was not kept yet.
func (p *protection) serve(sha string) bool {
	if k, ok := shaKey(sha); ok {
		p.mu.Lock()
		p.serving[k] = struct{}{}
		p.mu.Unlock()
	}
	return p.protect(sha)
}

// maxAsked bounds protection.asked: beyond it, it starts again empty
// (a rebuild asked again of an archive, no more).
const maxAsked = 1 << 16

// latestAsked reports whether a rebuild is to be asked for sha, an
// archive of a version a pin of the newest N has: when sha is not kept
// and was not asked for before (a rebuild under way may have read the
// records before the version's was written). It then keeps sha from the
// size limit (latest) until a rebuild begun after it has read the
// records: an archive fetched now, and committed before that rebuild,
// is not evicted in the meantime. The rebuild
// decides whether the version is among the newest N; one that is not
// stays so until the versions cached change, which their own archives,
// the rules' passes and prunes ask rebuilds for.
func (p *protection) latestAsked(sha string) bool {
	k, ok := shaKey(sha)
	if !ok {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, extra := p.extra[k]
	_, asked := p.asked[k]
	if extra || asked || p.set.has(k) {
		return false
	}
	if p.asked == nil || len(p.asked) >= maxAsked {
		p.asked = map[[32]byte]struct{}{}
	}
	p.asked[k] = struct{}{}
	if p.latest == nil {
		p.latest = map[[32]byte]struct{}{}
	}
	p.latest[k] = struct{}{}
	return true
}

// begin notes an import under way; end, that one ended.
func (p *protection) begin() {
	p.mu.Lock()
	p.imports++
	p.begun++
	p.mu.Unlock()
}

func (p *protection) end() {
	p.mu.Lock()
	if p.imports > 0 {
		p.imports--
	}
	p.mu.Unlock()
}

// importing protects sha, an archive an import is about to commit, as
// protect does, once no removal of the rules is deleting it: the import
// then finds it cached, and kept from the rules, or not cached, and
// commits it again.
func (p *protection) importing(sha string) {
	p.removing.Lock()
	defer p.removing.Unlock()
	p.protect(sha)
	if k, ok := shaKey(sha); ok {
		p.mu.Lock()
		if p.imported != nil {
			p.imported[k] = struct{}{}
		}
		p.mu.Unlock()
	}
}

// watch begins to note the archives imports protect (imported), for a
// named prune about to remove a version; unwatch ends it. One named
// prune at a time (Retainer.passMu).
func (p *protection) watch() {
	p.mu.Lock()
	p.imported = map[[32]byte]struct{}{}
	p.mu.Unlock()
}

func (p *protection) unwatch() {
	p.mu.Lock()
	p.imported = nil
	p.mu.Unlock()
}

// removeUnnamed runs remove, a named prune's deletion, for each of shas,
// the archives of a version whose record it removed, but for those named
// (by a record read once that removal was made) or imported since watch;
// it forgets as extra those it ran remove for, and returns the others,
// which stay protected: a record names them, or will once its import
// ends. Imports that protect one of shas after it wait for it, and find
// each kept or gone.
func (p *protection) removeUnnamed(shas []string, named map[string]bool, remove func(sha string)) (kept []string) {
	imported := func(k [32]byte) bool {
		_, ok := p.imported[k]
		return ok
	}
	for _, sha := range shas {
		if named[sha] {
			kept = append(kept, sha)
			continue
		}
		if k, _ := p.removeUnless(sha, imported, func() error { remove(sha); return nil }); k {
			kept = append(kept, sha)
		}
	}
	return kept
}

// generation returns the count of the set's replacements, taken before
// the rules read the records (removeUnkept).
func (p *protection) generation() uint64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.gen
}

// removeUnkept runs remove, the deletion of sha by the rules, unless sha
// is kept: by an import since the rules read the records (extra), or by
// records a rebuild read since (the set, replaced since generation read,
// their reading began: a record written since may name sha); kept says
// it was not run. A set read before the rules' reading keeps nothing
// that reading does not: what it pinned may be pinned no longer (a pin
// of the newest N, a version cached since).
func (p *protection) removeUnkept(sha string, read uint64, remove func() error) (kept bool, err error) {
	return p.removeUnless(sha, func(k [32]byte) bool {
		_, extra := p.extra[k]
		return extra || p.gen != read && p.set.has(k)
	}, remove)
}

// removeUnless is the deletion of a removal: under removing, it runs
// remove, the deletion of sha, unless keep (asked with mu held for
// reading) says sha stays; kept says it was not run. Once remove deleted
// sha, it forgets sha as extra (removed) before an import waiting for it
// protects sha again.
func (p *protection) removeUnless(sha string, keep func(k [32]byte) bool, remove func() error) (kept bool, err error) {
	p.removing.Lock()
	defer p.removing.Unlock()
	if k, ok := shaKey(sha); ok {
		p.mu.RLock()
		kept = keep(k)
		p.mu.RUnlock()
	}
	if kept {
		return true, nil
	}
	if err := remove(); err != nil {
		return false, err
	}
	p.removed(sha)
	return false, nil
}

// removed forgets sha as extra: a prune removed it.
func (p *protection) removed(sha string) {
	if k, ok := shaKey(sha); ok {
		p.mu.Lock()
		delete(p.extra, k)
		delete(p.serving, k)
		p.mu.Unlock()
	}
}

// extraSnapshot is what a rebuild began with: the extra archives, each
// marked not read yet (a record read keeps it: true), whether no import
// was under way (quiet), with the count of those begun, and the latest
// archives, whose records it reads.
type extraSnapshot struct {
	extra  map[[32]byte]bool
	quiet  bool
	begun  uint64
	latest [][32]byte
}

// snapshot returns how many archives are kept now, and what a rebuild
// begins with.
func (p *protection) snapshot() (int, extraSnapshot) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	extra := make(map[[32]byte]bool, len(p.extra))
	for k := range p.extra {
		extra[k] = false
	}
	latest := make([][32]byte, 0, len(p.latest))
	for k := range p.latest {
		latest = append(latest, k)
	}
	return len(p.set) + len(p.extra), extraSnapshot{extra: extra, quiet: p.imports == 0, begun: p.begun, latest: latest}
}

// replace sets the archives kept; the extra ones a record read keeps
// (marked in snap.extra) are now decided by their records. When no
// import was under way as the rebuild began, nor began since, the extra
// ones an import protected that no record read keeps go too: their
// import ended before the records were read, without writing one that
// keeps them (it failed). The latest archives the rebuild began with are
// decided by the records it read: kept by set when their version is
// among the newest N, no longer kept when it is not.
func (p *protection) replace(set shaSet, snap extraSnapshot) {
	p.mu.Lock()
	p.set = set
	p.gen++
	forgetUnread := snap.quiet && p.imports == 0 && p.begun == snap.begun
	for k, read := range snap.extra {
		_, serving := p.serving[k]
		if read || forgetUnread && !serving {
			delete(p.extra, k)
			delete(p.serving, k)
		}
	}
	for _, k := range snap.latest {
		delete(p.latest, k)
	}
	p.mu.Unlock()
	p.ready.Store(true)
}

// rebuild recomputes what the size limit may not evict and the pinned
// versions, and says when what is kept exceeds the limit. Unless pins
// select the newest N versions, it reads the records one at a time,
// keeping none: what it keeps is the sorted set of protected archives
// (32 bytes each), whose sizes it then reads in one ordered pass.
func (r *Retainer) rebuild() {
	// The database's pages that hold the records, which the pass maps
	// into the process, are given back at the end.
	defer r.store.ReleaseReadPages()
	n, snap := r.prot.snapshot()
	extra := snap.extra
	keys := make([][32]byte, 0, n) // as many as last time, most often
	var pinList []PinnedVersion
	visit := func(h *held) {
		if h.pinnedBy != "" {
			pinList = append(pinList, PinnedVersion{Kind: h.Kind, Address: h.Address, Version: h.Raw, Where: h.pinnedBy})
		}
		pinned := h.pinnedBy != ""
		for i, sha := range slices.Concat(h.Archives, h.SetAside) {
			k, ok := shaKey(sha)
			if !ok {
				continue
			}
			if pinned || i >= len(h.Archives) || !h.Refetchable(sha) {
				keys = append(keys, k)
				// Kept by a record from now on. Only so: an extra
				// archive that a record read here names but does not
				// keep (one that can be fetched again, sharing its
				// bytes) may be an import's whose record is not
				// written yet.
				if _, ok := extra[k]; ok {
					extra[k] = true
				}
			}
		}
	}
	pins, latest := r.pins.current()
	var err error
	if latest {
		var hs []*held
		if hs, err = r.holdings(); err == nil {
			for _, h := range hs {
				visit(h)
			}
		}
	} else {
		err = r.scanHeld(false, func(h *held) {
			h.pinnedBy, _ = pinnedBy(pinSelections(pins, h), h.Version, nil)
			visit(h)
		})
	}
	if err != nil {
		r.log.Warn("reading the cache for retention; what may be evicted is not updated", "error", err)
		return
	}
	protected := newSHASet(keys)
	var kept int64
	if r.offline {
		_, kept = r.store.Stats()
	} else if kept, err = cachedBytes(r.store, protected); err != nil {
		r.log.Warn("reading the sizes of the archives kept from the size limit; their total is not updated", "error", err)
		r.mu.Lock()
		kept = r.status.KeptBytes
		r.mu.Unlock()
	}
	r.prot.replace(protected, snap)
	r.store.SetEvictable(r.Evictable) // and a pass of the size limit, with what may go now

	unmet := r.cfg.MaxBytes > 0 && kept > r.cfg.MaxBytes
	r.mu.Lock()
	was := r.unmet
	r.unmet = unmet
	r.mu.Unlock()
	if unmet && !was {
		r.log.Warn("the cache size limit cannot be met: the packages that cannot be fetched again and the pinned ones alone exceed it, and are kept",
			"kept_bytes", kept, "max_bytes", r.cfg.MaxBytes)
	}
	if r.cfg.Metrics != nil {
		r.cfg.Metrics.RetentionKept(kept, unmet)
	}
	// The status last: what the status page shows has been logged and
	// counted (a reader that saw it before read older metrics).
	r.mu.Lock()
	r.pinList = pinList
	r.status.KeptBytes, r.status.LimitUnmet = kept, unmet
	r.mu.Unlock()
}

// errScanned stops a ScanBlobs that has seen what it needed.
var errScanned = errors.New("scanned")

// cachedBytes returns the total size of the archives of set that are
// cached. A set that is a fair part of the cache is sized in one ordered
// pass over the archives' records, which costs far less than as many
// lookups (and leaves StatBlob's memo to the requests); a small one by a
// lookup each.
func cachedBytes(store Blobs, set shaSet) (int64, error) {
	if len(set) == 0 {
		return 0, nil
	}
	if archives, _ := store.Stats(); len(set) < archives/16 {
		return lookedUpBytes(store, set), nil
	}
	return scannedBytes(store, set)
}

// lookedUpBytes is cachedBytes by a lookup of each archive.
func lookedUpBytes(store Blobs, set shaSet) int64 {
	var total int64
	for _, k := range set {
		if info, err := store.StatBlob(hex.EncodeToString(k[:])); err == nil {
			total += info.Size
		}
	}
	return total
}

// scannedBytes is cachedBytes by one ordered pass over the archives.
func scannedBytes(store Blobs, set shaSet) (int64, error) {
	var total int64
	i := 0
	err := store.ScanBlobs(func(sha string, size int64) error {
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
