package cache

import (
	"context"
	"errors"
	"sync"
	"time"
)

// lru tracks, for every committed blob, when it was last used and how many
// readers (and the writer that committed it, until it is closed) hold it,
// and evicts the least recently used unreferenced blobs when the cache is
// over its size limit. Access times live in memory only; at Open they are
// seeded from each blob's commit time.
//
// Eviction runs in a goroutine of the store's (evictLoop), never in the
// caller of Commit or Close: deleting an archive is thousands of chunk
// deletions, which must not stall the requests that serve the archives
// that stay. Callers only signal (kickEvict) when the cache may be over
// its limit; l.mu is held only to pick a victim, never while deleting.
type lru struct {
	max     int64
	onEvict func(BlobInfo)

	mu      sync.Mutex
	tick    int64 // last access stamp handed out; strictly increasing
	entries map[string]*lruEntry
}

type lruEntry struct {
	last      int64 // access stamp
	refs      int   // open readers, plus the committing writer until Close
	committed bool  // false while only a reader that has not found the record yet holds it
	evicting  bool  // chosen for eviction: no new references
}

func (l *lru) init(max int64, onEvict func(BlobInfo)) {
	l.max, l.onEvict = max, onEvict
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
	if e.refs > 0 {
		e.committed, e.evicting = false, false
		return
	}
	delete(l.entries, sha)
}

// victim picks the least recently used committed blob nobody references
// and marks it as being evicted, or returns "".
func (l *lru) victim() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var sha string
	var oldest int64
	for k, e := range l.entries {
		if !e.committed || e.refs > 0 || e.evicting {
			continue
		}
		if sha == "" || e.last < oldest {
			sha, oldest = k, e.last
		}
	}
	if sha != "" {
		l.entries[sha].evicting = true
	}
	return sha
}

func (l *lru) unmark(sha string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.entries[sha]; e != nil {
		e.evicting = false
	}
}

// kickEvict asks the eviction goroutine for a pass when the archives are
// over Options.MaxBytes. It never waits.
func (s *Store) kickEvict() {
	if s.lru.max <= 0 {
		return
	}
	if _, total := s.statsNow(); total <= s.lru.max {
		return
	}
	select {
	case s.evictKick <- struct{}{}:
	default: // a pass is asked for already
	}
}

// startEvicting starts the eviction goroutine, which Close and Shutdown
// stop and wait for; a kick from Open is taken up at once.
func (s *Store) startEvicting() {
	if s.lru.max <= 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stopEvict, s.evictDone = cancel, make(chan struct{})
	go s.evictLoop(ctx)
}

// evictLoop runs an eviction pass for every kick, and for every flush
// (tests), until ctx is done.
func (s *Store) evictLoop(ctx context.Context) {
	defer close(s.evictDone)
	for {
		var flushed chan struct{}
		select {
		case <-ctx.Done():
			return
		case <-s.evictKick:
		case flushed = <-s.evictFlush:
		}
		s.evict(ctx)
		if flushed != nil {
			close(flushed)
		}
	}
}

// stopEvicting stops the eviction goroutine and waits for it: a pass
// under way ends after the archive it is deleting.
func (s *Store) stopEvicting() {
	if s.stopEvict == nil {
		return
	}
	if h := s.hooks.evictStopWaits; h != nil {
		h()
	}
	s.stopEvict()
	<-s.evictDone
}

// evict deletes least recently used archives until the archives' total
// size is at most Options.MaxBytes, or nothing more may be evicted, or ctx
// is done. Only evictLoop calls it.
func (s *Store) evict(ctx context.Context) {
	l := &s.lru
	if l.max <= 0 || s.isClosed() {
		return
	}
	if _, total := s.Stats(); total <= l.max {
		return
	}
	if s.Writable() != nil {
		return // deleting is writing; retried once the cache writes again
	}
	evicted := 0
	defer func() {
		if evicted > 0 {
			s.kickGC() // return the space to the disk soon
		}
	}()
	for ctx.Err() == nil {
		if _, total := s.Stats(); total <= l.max {
			return
		}
		sha := l.victim()
		if sha == "" {
			return // everything left is in use; retried on the next commit or close
		}
		if h := s.hooks.evicting; h != nil {
			h(sha)
		}
		info, err := s.StatBlob(sha)
		if err == nil {
			err = s.DeleteBlob(sha) // forgets the entry
		}
		if errors.Is(err, ErrNotFound) {
			l.forget(sha)
			continue
		}
		if errors.Is(err, ErrClosed) {
			l.unmark(sha)
			return
		}
		if err != nil {
			l.unmark(sha)
			s.log.Warn("evicting archive", "sha256", sha, "error", err)
			return
		}
		evicted++
		s.log.Info("evicted least recently used archive", "sha256", sha, "size", info.Size, "max_bytes", l.max)
		if l.onEvict != nil {
			l.onEvict(info)
		}
	}
}
