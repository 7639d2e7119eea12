// Opening read-only and reopening writable as free space comes and goes,
// and the free-space watch that decides between them.

package cache

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// afterWritableOpen removes what interrupted writes left, trims the cache
// to its limit, and has the value-log GC return the space soon. orphans
// are the stages of the chunks that the count found no commit record for
// (nil: the count failed, cleanOrphans looks for them).
func (s *Store) afterWritableOpen(orphans map[string]int) {
	if !s.space.refresh(s.lsmSize()) {
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
		s.log.Warn("cleaning up interrupted archive writes", "error", err)
	} else if n > 0 {
		s.log.Info("removed chunks of interrupted archive writes", "chunks", n)
		s.kickGC()
	}
	s.kickEvict()
}

// openReadOnly opens the database without writing anything, because the
// disk is below the reserve at start-up. Badger refuses when its
// write-ahead logs need replaying (after a crash); then the store has no
// database until there is room, and every lookup misses.
func (s *Store) openReadOnly() {
	db, err := openBadger(s.bopts.WithReadOnly(true))
	if err != nil {
		s.log.Warn("disk full at start-up and the cache cannot be opened read-only: serving without the cache until there is room",
			"dir", s.space.dir, "error", quiet(err))
		return
	}
	s.db, s.readOnly = db, true
	if err := s.countNow(); err != nil {
		s.log.Warn("disk full at start-up and the cache cannot be read: serving without the cache until there is room",
			"dir", s.space.dir, "error", err)
		s.db, s.readOnly = nil, false
		db.Close()
		return
	}
	archives, bytes := s.Stats()
	s.log.Warn("disk full at start-up: cache opened read-only, serving what it holds until there is room",
		"dir", s.space.dir, "archives", archives, "bytes", bytes)
}

// reopenWritable replaces a read-only (or missing) database by a
// read-write one, once there is room.
func (s *Store) reopenWritable() {
	s.stopCounting() // of the read-only database
	s.dbmu.Lock()
	if s.db != nil && !s.readOnly {
		s.dbmu.Unlock()
		return
	}
	if s.db != nil {
		if err := s.db.Close(); err != nil {
			s.log.Warn("closing the read-only cache", "error", quiet(err))
		}
		s.db = nil
	}
	db, err := openBadger(s.bopts)
	if err != nil {
		s.dbmu.Unlock()
		s.log.Error("opening the cache read-write now that there is room", "dir", s.space.dir, "error", quiet(err))
		s.openReadOnlyLocked()
		s.stats.Clear() // answers given while there was no database
		return
	}
	// Count while dbmu is held for writing: the store is writable from
	// here on, and a commit or delete before the counters are set would
	// be lost from them (or counted twice).
	s.db, s.readOnly = db, false
	// Counted again from nothing: nothing was committed or deleted while
	// the database was read-only or missing, nor can be before the lock
	// is released.
	s.startCount(db.NewTransaction(false), true, s.afterWritableOpen)
	s.dbmu.Unlock()
	s.stats.Clear() // absences seen without the database
	s.log.Info("cache opened read-write: there is room again", "dir", s.space.dir)
}

// openReadOnlyLocked retries the read-only database after a failed
// reopen, so that cached archives stay served.
func (s *Store) openReadOnlyLocked() {
	s.dbmu.Lock()
	defer s.dbmu.Unlock()
	if s.db != nil {
		return
	}
	db, err := openBadger(s.bopts.WithReadOnly(true))
	if err != nil {
		return
	}
	s.db, s.readOnly = db, true
}

// watch checks the free space every interval until ctx is done: it keeps
// the writable state current when nothing writes, reopens the database
// read-write when space returns, and then removes what failed writes left.
func (s *Store) watch(ctx context.Context) {
	defer close(s.watchDone)
	t := time.NewTicker(s.space.interval)
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

// checkSpace is one round of watch.
func (s *Store) checkSpace() {
	was := s.space.canWrite() == nil
	if !s.space.refresh(s.lsmSize()) {
		return
	}
	s.dbmu.RLock()
	writable := s.db != nil && !s.readOnly
	s.dbmu.RUnlock()
	switch {
	case !writable:
		s.reopenWritable()
	case !was:
		// Writers that failed could not delete their chunks.
		if _, err := s.cleanOrphans(); err != nil {
			s.log.Warn("cleaning up failed archive writes", "error", err)
		}
		s.kickGC()
	}
}

// lsmSize is the size of Badger's LSM tree on disk, as Badger last
// measured it (at Open and every minute since): the tree grows slowly.
func (s *Store) lsmSize() int64 {
	s.dbmu.RLock()
	defer s.dbmu.RUnlock()
	if s.db == nil {
		return sstBytes(s.space.dir)
	}
	lsm, _ := s.db.Size()
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
func (s *Store) Writable() error {
	if s.isClosed() {
		return ErrClosed
	}
	s.dbmu.RLock()
	defer s.dbmu.RUnlock()
	return s.writableLocked()
}

// writableLocked is Writable; caller holds dbmu.
func (s *Store) writableLocked() error {
	if s.db == nil || s.readOnly {
		if err := s.space.canWrite(); err != nil {
			return err
		}
		return fmt.Errorf("%w: the disk was full at start-up; the cache is reopened read-write within %s", ErrNotWritable, s.space.interval)
	}
	return s.space.canWrite()
}

// FreeBytes is the free space on the cache's file system at the last
// check, or -1 when unknown (in memory, checks disabled or failing).
func (s *Store) FreeBytes() int64 {
	if s.space.disabled() {
		return -1
	}
	return s.space.freeBytes()
}

// Reserve is the free space below which the cache does not write (the
// configured reserve plus the LSM tree), or -1 when not checked.
func (s *Store) Reserve() int64 {
	if s.space.disabled() {
		return -1
	}
	s.space.mu.Lock()
	defer s.space.mu.Unlock()
	return s.space.floor()
}

// view runs fn in a read-only transaction.
