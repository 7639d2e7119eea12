package cache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrInUse is returned by EvictBlob for an archive open for reading or
// whose writer is not yet closed: it is not deleted from under them.
var ErrInUse = errors.New("cache: archive in use")

// lru tracks, for every committed blob, when it was last used and how many
// readers (and the writer that committed it, until it is closed) hold it,
// and evicts the least recently used unreferenced blobs when the cache is
// over its size limit. Access times live in memory only; at Open they are
// seeded from each blob's commit time.
//
// Eviction runs in a goroutine of the store's (evictor.loop), never in
// the caller of Commit or Close: deleting an archive is thousands of
// chunk deletions, which must not stall the requests that serve the
// archives that stay. Callers only signal (evictor.kick) when the cache
// may be over its limit; l.mu is held only to pick a victim, never while
// deleting.
type lru struct {
	max     int64
	onEvict func(BlobInfo)
	// evictable, when set (SetEvictable), says which committed blobs the
	// size limit may evict; the others are kept whatever the limit.
	evictable atomic.Pointer[func(sha string) bool]
	// unmet says the last pass ended over the limit with only kept
	// blobs left (logged once until a pass evicts again).
	unmet atomic.Bool

	mu      sync.Mutex
	tick    int64 // last access stamp handed out; strictly increasing
	entries map[string]*lruEntry
}

type lruEntry struct {
	last      int64 // access stamp
	refs      int   // open readers, plus the committing writer until Close
	committed bool  // false while only a reader that has not found the record yet holds it
	evicting  bool  // chosen for eviction: no new references
	// eviction is the eviction under way; set while evicting.
	eviction *eviction
}

// eviction is one archive's eviction under way, which others may wait for.
type eviction struct {
	// done is closed when it ends (the blob deleted, or kept after all).
	done chan struct{}
	// info is the archive's, once deleteMarked found it: what the
	// eviction deletes, if it ends with the archive gone.
	info BlobInfo
}

// markEvicting marks e as being evicted. Caller holds l.mu.
func (e *lruEntry) markEvicting() {
	e.evicting = true
	e.eviction = &eviction{done: make(chan struct{})}
}

// endEvicting ends e's eviction, if any. Caller holds l.mu.
func (e *lruEntry) endEvicting() {
	e.evicting = false
	if e.eviction != nil {
		close(e.eviction.done)
		e.eviction = nil
	}
}

// evictingNow returns a channel closed when the eviction of sha under way
// ends; nil when none is.
func (l *lru) evictingNow(sha string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.entries[sha]; e != nil && e.evicting {
		return e.eviction.done
	}
	return nil
}

// noteEvicted records info as what the eviction of sha under way deletes.
func (l *lru) noteEvicted(sha string, info BlobInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.entries[sha]; e != nil && e.eviction != nil {
		e.eviction.info = info
	}
}

func (l *lru) init(max int64, onEvict func(BlobInfo), evictable func(string) bool) {
	l.max, l.onEvict = max, onEvict
	if evictable != nil {
		l.evictable.Store(&evictable)
	}
	l.entries = make(map[string]*lruEntry)
}

// stamp returns a new access stamp. Caller holds l.mu.
func (l *lru) stamp(t time.Time) int64 {
	l.tick = max(l.tick+1, t.UnixNano())
	return l.tick
}

// add records a committed blob last used at t (at Open: its commit time;
// blobs are seen in key order, not time order, so t is taken as it is).
func (l *lru) add(sha string, t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entry(sha)
	e.committed = true
	e.last = max(e.last, t.UnixNano()) // used since Open: keep that
	l.tick = max(l.tick, e.last)
}

// addPinned records a blob just committed by a writer, referenced by that
// writer until it is closed.
func (l *lru) addPinned(sha string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entry(sha)
	e.committed = true
	e.last = l.stamp(time.Now())
	e.refs++
}

// entry returns sha's entry, creating it. Caller holds l.mu.
func (l *lru) entry(sha string) *lruEntry {
	e := l.entries[sha]
	if e == nil {
		e = &lruEntry{}
		l.entries[sha] = e
	}
	return e
}

// acquire takes a reference on sha and marks it used now. It returns
// false when sha is being evicted.
func (l *lru) acquire(sha string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entry(sha)
	if e.evicting {
		return false
	}
	e.refs++
	e.last = l.stamp(time.Now())
	return true
}

// release drops a reference taken by acquire or addPinned.
func (l *lru) release(sha string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entries[sha]
	if e == nil {
		return
	}
	e.refs--
	if e.refs <= 0 && !e.committed {
		delete(l.entries, sha)
	}
}

// forget removes a deleted blob; references still held keep the entry
// (uncommitted) until they are released.
func (l *lru) forget(sha string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entries[sha]
	if e == nil {
		return
	}
	e.endEvicting()
	if e.refs > 0 {
		e.committed = false
		return
	}
	delete(l.entries, sha)
}

// victim picks the least recently used committed blob nobody references
// that may be evicted, and marks it as being evicted, or returns "";
// kept counts the blobs passed over because they may not be evicted.
func (l *lru) victim() (sha string, kept int) {
	may := func(string) bool { return true }
	if fn := l.evictable.Load(); fn != nil {
		may = *fn
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var oldest int64
	for k, e := range l.entries {
		if !e.committed || e.refs > 0 || e.evicting {
			continue
		}
		if !may(k) {
			kept++
			continue
		}
		if sha == "" || e.last < oldest || e.last == oldest && k < sha { // as WouldEvict orders them
			sha, oldest = k, e.last
		}
	}
	if sha != "" {
		l.entries[sha].markEvicting()
	}
	return sha, kept
}

// claim marks sha as being evicted if it is committed and nobody
// references it. When nobody references it but an eviction of it is under
// way, claim returns that eviction with ErrInUse: it ends with the archive
// deleted, or kept after all.
func (l *lru) claim(sha string) (*eviction, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entries[sha]
	switch {
	case e == nil:
		// Not tracked: without a size limit the count adds no entries,
		// and before the count is done not all are there. EvictBlob's
		// StatBlob says whether it exists.
		e = l.entry(sha)
		e.committed = true
	case e.refs > 0:
		// Open for reading (an untracked archive opened has an entry,
		// not committed, while it is open).
		return nil, fmt.Errorf("%w: %s", ErrInUse, sha)
	case e.evicting:
		return e.eviction, fmt.Errorf("%w: %s (being evicted)", ErrInUse, sha)
	case !e.committed:
		return nil, fmt.Errorf("%w: archive %s", ErrNotFound, sha)
	}
	e.markEvicting()
	return nil, nil
}

// held reports whether anyone holds a reference on sha: of an archive
// marked for eviction, a writer that committed it since (addPinned, which
// does not refuse it as acquire does).
func (l *lru) held(sha string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entries[sha]
	return e != nil && e.refs > 0
}

// inUse returns ErrInUse when one of shas is referenced (open for
// reading, or committed by a writer not yet closed) or being evicted,
// marking none of them.
func (l *lru) inUse(shas []string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, sha := range shas {
		switch e := l.entries[sha]; {
		case e == nil:
		case e.refs > 0:
			return fmt.Errorf("%w: %s", ErrInUse, sha)
		case e.evicting:
			return fmt.Errorf("%w: %s (being evicted)", ErrInUse, sha)
		}
	}
	return nil
}

// unmark ends the eviction of sha that was not deleted after all.
func (l *lru) unmark(sha string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.entries[sha]; e != nil {
		e.endEvicting()
	}
}

// evictor keeps the archives of Blobs within Options.MaxBytes: a
// goroutine of the store's deletes the least recently used archives
// that nobody holds and that may be evicted, whenever it is kicked and
// they are over the limit.
type evictor struct {
	blobs *Blobs
	lru   lru
	// kicks asks the goroutine for a pass; flush asks for one and is
	// answered when it is over (Store.EvictNow). stopLoop and done stop it.
	kicks    chan struct{}
	flush    chan chan struct{}
	stopLoop context.CancelFunc
	done     chan struct{}
}

// SetEvictable sets which committed archives the size limit
// (Options.MaxBytes) may evict: those for which fn returns true. The
// others are kept, over the limit if need be. fn is called by the
// eviction goroutine, with a lock of the store's held: it must be quick
// and must not call the store. nil: every archive may be evicted (the
// default). EvictBlob does not ask fn.
func (s *Blobs) SetEvictable(fn func(sha string) bool) {
	if fn == nil {
		s.evict.lru.evictable.Store(nil)
		return
	}
	s.evict.lru.evictable.Store(&fn)
	s.evict.kick()
}

// EvictNow runs an eviction pass now and waits until it is over, or ctx is
// done: after it, the archives are within Options.MaxBytes unless what
// is left is in use or may not be evicted (see Blobs.SetEvictable).
// Without a size limit it does nothing. A command that reports what it
// removed (cache prune) waits so for what the size limit evicts.
func (s *Store) EvictNow(ctx context.Context) error { return s.evict.now(ctx) }

// WouldEvict returns the archives a pass of the size limit would evict
// now, were the archives gone (their sizes by sha256) deleted first: in
// the order the pass would take them, least recently used first, of
// those may says it may evict (in place of SetEvictable's function, which
// a caller that evicts nothing has keep everything), passing over those
// in use. It deletes nothing, and marks nothing; nil without a size
// limit. What clients read or write meanwhile changes what a pass then
// takes: a listing for a command that removes nothing (cache prune
// --dry-run).
func (s *Store) WouldEvict(gone map[string]int64, may func(sha string) bool) []BlobInfo {
	l := &s.evict.lru
	if l.max <= 0 {
		return nil
	}
	s.counted()
	total := s.occupied()
	for _, size := range gone {
		total -= size
	}
	type candidate struct {
		sha  string
		last int64
	}
	var cs []candidate
	l.mu.Lock()
	for sha, e := range l.entries {
		if _, ok := gone[sha]; !ok && e.committed && e.refs == 0 && !e.evicting {
			cs = append(cs, candidate{sha, e.last})
		}
	}
	l.mu.Unlock()
	slices.SortFunc(cs, func(a, b candidate) int { return cmp.Or(cmp.Compare(a.last, b.last), strings.Compare(a.sha, b.sha)) })
	var out []BlobInfo
	for _, c := range cs {
		if total <= l.max {
			break
		}
		if !may(c.sha) {
			continue
		}
		if info, _, err := s.statBlob(c.sha); err == nil {
			out = append(out, info)
			total -= info.Size
		}
	}
	return out
}

// now runs a pass and waits for it (Store.EvictNow).
func (e *evictor) now(ctx context.Context) error {
	if e.done == nil {
		return nil
	}
	done := make(chan struct{})
	select {
	case e.flush <- done:
	case <-e.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		select {
		case <-done: // over as ctx ended: said so, not at random
			return nil
		default:
			return ctx.Err()
		}
	}
}

// EvictBlob deletes the committed archive sha unless it is open for
// reading or its writer is not yet closed (ErrInUse), a writer that
// commits it while EvictBlob runs included: what retention removes,
// never from under a reader. It returns what was deleted. An
// archive the size limit is evicting meanwhile is waited for: EvictBlob
// returns what that eviction deleted, or, when it kept the archive after
// all, tries again. Once a table is found damaged it deletes nothing
// (ErrTablesDamaged): what retention removes was decided by passes over
// the records, which the damage cuts short (an archive whose record it
// hides is taken for one no record names).
func (s *Blobs) EvictBlob(sha string) (BlobInfo, error) {
	if err := checkSHA(sha); err != nil {
		return BlobInfo{}, err
	}
	if err := s.db.checkTables(); err != nil {
		return BlobInfo{}, err
	}
	for {
		ev, err := s.evict.lru.claim(sha)
		if ev != nil {
			<-ev.done // one archive's deletion: bounded
			if _, _, err := s.statBlob(sha); errors.Is(err, ErrNotFound) && ev.info.SHA256 == sha {
				return ev.info, nil
			}
			continue
		}
		if err != nil {
			return BlobInfo{}, err
		}
		break
	}
	info, err := s.deleteMarked(sha, s.hooks.evicting)
	if err != nil {
		return BlobInfo{}, err
	}
	s.db.kickGC()
	return info, nil
}

// UnlessInUse runs fn unless one of the committed archives shas is open
// for reading or its writer is not yet closed (ErrInUse, and fn does not
// run); it returns fn's error. fn runs with no archive marked for
// eviction, so it may wait on anything a writer of one of them holds (a
// writer of an archive being evicted waits for the eviction to end). An
// archive not cached, or not committed, is skipped. It deletes nothing,
// and marks nothing, so that no reader is refused while it asks: for a
// caller that must not leave what names the archives without them
// (retention removes a version that cannot be fetched again, its record
// in fn, then the archives that nothing names since, each by EvictBlob,
// which refuses one opened meanwhile).
func (s *Blobs) UnlessInUse(shas []string, fn func() error) error {
	for _, sha := range shas {
		if err := checkSHA(sha); err != nil {
			return err
		}
	}
	// Whether any is in use, asked of all at once: none is marked for
	// eviction, which would refuse its readers (acquire) while it is
	// asked, though nothing is deleted.
	var cached []string
	for _, sha := range shas {
		if _, _, err := s.statBlob(sha); errors.Is(err, ErrNotFound) {
			continue // not cached
		}
		cached = append(cached, sha)
	}
	if err := s.evict.lru.inUse(cached); err != nil {
		return err
	}
	return fn()
}

// deleteMarked deletes the archive sha, which claim or victim marked for
// eviction: StatBlob does not find it from then on (evicting, a test's
// hook, is called then); an archive gone already is forgotten, and one
// whose deletion failed, or that a writer committed since it was marked
// (ErrInUse: deleteBlob), is unmarked, and found again.
func (s *Blobs) deleteMarked(sha string, evicting func(string)) (BlobInfo, error) {
	s.stats.Forget(sha)
	if evicting != nil {
		evicting(sha)
	}
	info, _, err := s.statBlob(sha)
	if err == nil {
		s.evict.lru.noteEvicted(sha, info)
		err = s.deleteBlob(sha, s.evict.lru.held) // forgets the entry
	}
	switch {
	case errors.Is(err, ErrNotFound):
		s.evict.lru.forget(sha)
	case err != nil:
		s.evict.lru.unmark(sha)
		s.stats.Forget(sha)
	}
	return info, err
}

// overLimit reports whether the archives, committed and being staged,
// are over Options.MaxBytes; wait: once the archives are counted.
func (e *evictor) overLimit(wait bool) bool {
	if wait {
		e.blobs.counted()
	}
	return e.blobs.occupied() > e.lru.max
}

// pressForRoom asks for an eviction pass and a GC round: a writer waits
// for the data directory's budget.
func (e *evictor) pressForRoom() {
	e.kick()
	e.blobs.db.kickGC()
}

// kick asks the eviction goroutine for a pass when the archives (those
// being staged included) are over Options.MaxBytes. It never waits.
func (e *evictor) kick() {
	if e.lru.max <= 0 || !e.overLimit(false) {
		return
	}
	select {
	case e.kicks <- struct{}{}:
	default: // a pass is asked for already
	}
}

// start starts the eviction goroutine, which Close and Shutdown stop and
// wait for; a kick from Open is taken up at once.
func (e *evictor) start() {
	if e.lru.max <= 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.stopLoop, e.done = cancel, make(chan struct{})
	go e.loop(ctx)
}

// loop runs an eviction pass for every kick, and for every flush, until
// ctx is done.
func (e *evictor) loop(ctx context.Context) {
	defer close(e.done)
	for {
		var flushed chan struct{}
		select {
		case <-ctx.Done():
			return
		case <-e.kicks:
		case flushed = <-e.flush:
		}
		e.pass(ctx)
		if flushed != nil {
			close(flushed)
		}
	}
}

// stop stops the eviction goroutine and waits for it: a pass under way
// ends after the archives it is deleting.
func (e *evictor) stop() {
	if e.stopLoop == nil {
		return
	}
	if h := e.blobs.hooks.evictStopWaits; h != nil {
		h()
	}
	e.stopLoop()
	<-e.done
}

// pass deletes least recently used archives until the archives' total
// size is at most Options.MaxBytes, or nothing more may be evicted, or ctx
// is done: in rounds of the archives that together cover what is over
// (evictBatch at most), deleted at once. Only loop calls it.
func (e *evictor) pass(ctx context.Context) {
	s, l := e.blobs, &e.lru
	if l.max <= 0 || s.db.isClosed() {
		return
	}
	if !e.overLimit(true) {
		return
	}
	if s.db.writable() != nil {
		return // deleting is writing; retried once the cache writes again
	}
	// What may go was decided by passes over the records (the count's,
	// retention's: SetEvictable), which a damaged table cuts short: an
	// archive that cannot be fetched again, whose record it hides, would
	// be taken for one that may go.
	if s.db.checkTables() != nil {
		return
	}
	evicted := 0
	defer func() {
		if evicted > 0 {
			s.db.kickGC() // return the space to the disk soon
		}
	}()
	for ctx.Err() == nil {
		s.counted()
		over := s.occupied() - l.max
		if over <= 0 {
			return
		}
		// The least recently used archives that together cover what is
		// over, deleted at once: a deletion waits for its writes, in
		// Badger's write queue with the writers' chunks and commits, and
		// a pass that waited for them one archive after the other let
		// writers committing together outrun it, far over the limit.
		var victims []string
		for covered := int64(0); covered < over && len(victims) < evictBatch; {
			sha, kept := l.victim()
			if sha == "" {
				if len(victims) == 0 && kept > 0 && !l.unmet.Swap(true) {
					_, total := s.Stats()
					s.log.Info("the cache is over its size limit, and what is left may not be evicted now (see the engine's retention)",
						"bytes", total, "max_bytes", l.max, "kept_archives", kept)
				}
				break
			}
			victims = append(victims, sha)
			info, _, err := s.statBlob(sha)
			if err != nil {
				break // gone already, or not known: what it covers is found after its deletion
			}
			covered += info.Size
		}
		if len(victims) == 0 {
			return // everything left is in use or kept; retried on the next commit or close
		}
		l.unmet.Store(false)
		type deleted struct {
			info BlobInfo
			err  error
		}
		results := make([]deleted, len(victims))
		var wg sync.WaitGroup
		for i, sha := range victims {
			wg.Add(1)
			go func() {
				defer wg.Done()
				info, err := s.deleteMarked(sha, s.hooks.evicting)
				results[i] = deleted{info, err}
			}()
		}
		wg.Wait()
		stop := false
		for i, r := range results {
			switch {
			case errors.Is(r.err, ErrNotFound) || errors.Is(r.err, ErrInUse):
				// gone already, or committed again since it was picked
			case errors.Is(r.err, ErrClosed):
				stop = true
			case r.err != nil:
				s.log.Warn("evicting archive", "sha256", victims[i], "error", r.err)
				stop = true
			default:
				evicted++
				s.log.Info("evicted least recently used archive", "sha256", victims[i], "size", r.info.Size, "max_bytes", l.max)
				if l.onEvict != nil {
					l.onEvict(r.info)
				}
			}
		}
		if stop {
			return
		}
	}
}

// evictBatch is the most archives a pass deletes at once.
const evictBatch = 16
