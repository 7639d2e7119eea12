// Opening read-only and reopening writable as free space comes and goes,
// and the free-space watch that decides between them.

package cache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/tfmirror/tfmirror/v2/cache/internal/disk"
)

// afterWritableOpen removes what interrupted writes left, trims the cache
// to its limit, and has the value-log GC return the space soon (that of
// these chunks, and of deletions before the last close). orphans
// are the stages of the chunks that the count found no commit record for
// (nil: the count failed, cleanOrphans looks for them).
func (s *Store) afterWritableOpen(orphans map[string]int) {
	if !s.db.space.Refresh(s.db.lsmSize()) {
		return // retried when there is room (checkSpace)
	}
	var n int
	var err error
	if orphans != nil {
		n, err = s.removeStages(orphans)
	} else {
		n, err = s.cleanOrphans()
	}
	if err != nil {
		s.db.log.Warn("cleaning up interrupted archive writes", "error", err)
	} else if n > 0 {
		s.db.log.Info("removed chunks of interrupted archive writes", "chunks", n)
	}
	// A round now, not at the GC's first interval: a store closed
	// without collecting (serve's shutdown) right after deletions left
	// their space for this start, its compaction at close having counted
	// them.
	s.db.kickGC()
	s.evict.kick()
}

// openReadOnly opens the database without writing anything, because the
// disk is below the reserve at start-up, or its file system is mounted
// read-only (disk.ErrReadOnly). Badger refuses when its
// write-ahead logs need replaying (after a crash); then the store has no
// database until there is room, and every lookup misses. It fails only
// when another process holds the directory (where Badger's lock guards
// it, disk.LockDir): the store must not go on without it.
func (s *Store) openReadOnly() error {
	d := s.db
	var db *badger.DB
	err := errNeedsReplay
	if !needsReplay(d.bopts) {
		db, err = openBadger(d.bopts.WithReadOnly(true))
	}
	if err != nil && strings.Contains(err.Error(), "Cannot acquire directory lock") {
		return err
	}
	if err != nil {
		d.log.Warn("disk full at start-up and the cache cannot be opened read-only: serving without the cache until there is room",
			"dir", d.space.Dir, "error", quiet(err))
		return nil
	}
	d.bdb, d.readOnly = db, true
	if err := s.countNow(); err != nil {
		d.log.Warn("disk full at start-up and the cache cannot be read: serving without the cache until there is room",
			"dir", d.space.Dir, "error", err)
		d.bdb, d.readOnly = nil, false
		db.Close()
		return nil
	}
	archives, bytes := s.Stats()
	if errors.Is(d.space.CanWrite(), disk.ErrReadOnly) {
		d.log.Warn("file system mounted read-only at start-up: cache opened read-only, serving what it holds until it is writable",
			"dir", d.space.Dir, "archives", archives, "bytes", bytes)
		return nil
	}
	d.log.Warn("disk full at start-up: cache opened read-only, serving what it holds until there is room",
		"dir", d.space.Dir, "archives", archives, "bytes", bytes)
	return nil
}

// errNeedsReplay: the database's write-ahead log needs replaying.
var errNeedsReplay = errors.New("its write-ahead log needs replaying (the process before did not close it), which a read-only open cannot do")

// needsReplay reports whether the database's write-ahead log needs
// replaying, which Badger refuses to do read-only: a memtable file is
// left in its directory (a database closed cleanly leaves none). Badger
// is not asked then: an Open it refuses that way leaves the goroutines
// and caches it started running, once per refusal, for the life of the
// process. Only where the store holds the directory's lock itself
// (disk.LockDir): elsewhere Badger's open is what finds another
// process holding it.
func needsReplay(opts badger.Options) bool {
	if opts.InMemory || !opts.BypassLockGuard {
		return false
	}
	mem, _ := filepath.Glob(filepath.Join(opts.Dir, "*.mem"))
	return len(mem) > 0
}

// reopenWritable replaces a read-only (or missing) database by a
// read-write one, once there is room. It reports false when Badger
// refused.
func (s *Store) reopenWritable() bool {
	d := s.db
	s.stopCounting() // of the read-only database
	d.dbmu.Lock()
	if d.bdb != nil && !d.readOnly {
		d.dbmu.Unlock()
		return true
	}
	if d.bdb != nil {
		if err := d.bdb.Close(); err != nil {
			d.log.Warn("closing the read-only cache", "error", quiet(err))
		}
		d.bdb = nil
	}
	db, err := d.openReplaying()
	if err != nil {
		d.dbmu.Unlock()
		d.log.Error("opening the cache read-write now that there is room", "dir", d.space.Dir, "error", quiet(err))
		d.openReadOnlyLocked()
		s.stats.Clear() // answers given while there was no database
		return false
	}
	// Count while dbmu is held for writing: the store is writable from
	// here on, and a commit or delete before the counters are set would
	// be lost from them (or counted twice).
	d.bdb, d.readOnly = db, false
	// Counted again from nothing: nothing was committed or deleted while
	// the database was read-only or missing, nor can be before the lock
	// is released.
	s.startCount(db.NewTransaction(false), true, s.afterWritableOpen)
	d.dbmu.Unlock()
	s.stats.Clear() // absences seen without the database
	d.log.Info("cache opened read-write: there is room again", "dir", d.space.Dir)
	return true
}

// openReadOnlyLocked retries the read-only database after a failed
// reopen, so that cached archives stay served.
func (d *database) openReadOnlyLocked() {
	d.dbmu.Lock()
	defer d.dbmu.Unlock()
	if d.bdb != nil || needsReplay(d.bopts) {
		return
	}
	db, err := openBadger(d.bopts.WithReadOnly(true))
	if err != nil {
		return
	}
	d.bdb, d.readOnly = db, true
}

// watch checks the free space every interval until ctx is done: it keeps
// the writable state current when nothing writes, reopens the database
// read-write when space returns, and then removes what failed writes left.
func (s *Store) watch(ctx context.Context) {
	defer close(s.watchDone)
	t := time.NewTicker(s.db.space.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.checkSpace()
	}
}

// Bounds of the wait before a read-write open Badger refused is tried
// again (checkSpace).
const (
	minReopenWait = 2 * time.Second
	maxReopenWait = 5 * time.Minute
)

// reopenBackoff is when a read-write open Badger refused is tried again:
// checkSpace's own (watch's goroutine).
type reopenBackoff struct {
	next time.Time
	wait time.Duration
}

// checkSpace is one round of watch.
func (s *Store) checkSpace() {
	d := s.db
	was := d.space.CanWrite() == nil
	if !d.space.Refresh(d.lsmSize()) {
		return
	}
	d.dbmu.RLock()
	writable := d.bdb != nil && !d.readOnly
	d.dbmu.RUnlock()
	switch {
	case !writable:
		// A database Badger refused to open is tried again at growing
		// intervals, not at every check: each refusal is an error
		// logged, and what Badger started for it is left running.
		if now := time.Now(); now.After(s.reopen.next) {
			if s.reopenWritable() {
				s.reopen.wait = 0
			} else {
				s.reopen.wait = min(max(2*s.reopen.wait, minReopenWait), maxReopenWait)
				s.reopen.next = now.Add(s.reopen.wait)
			}
		}
	case !was:
		// Writers that failed could not delete their chunks.
		if _, err := s.cleanOrphans(); err != nil {
			d.log.Warn("cleaning up failed archive writes", "error", err)
		}
		d.kickGC()
	}
}

// lsmSize is the size of Badger's LSM tree on disk, as Badger last
// measured it (at Open and every minute since): the tree grows slowly.
func (d *database) lsmSize() int64 {
	d.dbmu.RLock()
	defer d.dbmu.RUnlock()
	if d.bdb == nil {
		return sstBytes(d.space.Dir)
	}
	lsm, _ := d.bdb.Size()
	return lsm
}

// sstBytes is the size of the LSM tree's files in dir, before the
// database is open.
func sstBytes(dir string) int64 {
	if dir == "" {
		return 0
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range entries {
		if filepath.Ext(e.Name()) != ".sst" {
			continue
		}
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// Writable returns nil when the cache stores what it is given, or why not
// (an error wrapping ErrNotWritable).
func (s *Store) Writable() error { return s.db.writable() }

func (d *database) writable() error {
	if d.isClosed() {
		return ErrClosed
	}
	d.dbmu.RLock()
	defer d.dbmu.RUnlock()
	return d.writableLocked()
}

// writableLocked is writable; caller holds dbmu.
func (d *database) writableLocked() error {
	if d.bdb == nil || d.readOnly {
		if err := d.space.CanWrite(); err != nil {
			return err
		}
		return fmt.Errorf("%w: the disk was full at start-up; the cache is reopened read-write within %s", ErrNotWritable, d.space.Interval)
	}
	return d.space.CanWrite()
}

// FreeBytes is the free space on the cache's file system at the last
// check, or -1 when unknown (in memory, checks disabled or failing).
func (s *Store) FreeBytes() int64 {
	if s.db.space.Disabled() {
		return -1
	}
	return s.db.space.FreeBytes()
}

// Reserve is the free space below which the cache does not write (the
// configured reserve plus the LSM tree), or -1 when not checked.
func (s *Store) Reserve() int64 {
	if s.db.space.Disabled() {
		return -1
	}
	return s.db.space.Floor()
}
