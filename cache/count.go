// Counting the committed archives when the database opens, in the
// background.

package cache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// counting is the state of the count of the committed archives that Open
// (and a reopen) start: reading every commit record takes time in
// proportion to the archives (about a second per 100,000 on a busy
// machine), so it runs beside the requests rather than before them.
type counting struct {
	// done is closed once the archives are counted (or the count
	// failed or was stopped): Stats waits for it. Guarded by Blobs.mu.
	done chan struct{}
	// stop ends the count and what follows it; exited is closed when its
	// goroutine has returned. Guarded by Blobs.mu.
	stop   context.CancelFunc
	exited chan struct{}
}

// countedRecord is the part of a commit record that counting reads;
// lruRecord what it reads too when the size limit needs every archive's
// entry.
type countedRecord struct {
	Size    int64  `json:"size"`
	Stage   string `json:"stage"`
	Damaged bool   `json:"damaged"`
}

type lruRecord struct {
	countedRecord
	Created time.Time `json:"created"`
}

// startCount counts, in a goroutine of the store's, the archives that
// the read transaction snap sees, adds them to the counters (which hold
// only what was committed and deleted since snap was taken) and to the
// LRU, and then runs then (nil: nothing) with the stages of the chunks
// that no commit record refers to in snap (nil if the count failed),
// unless the store is closing.
// With reset, the counters start from zero (a database reopened): Stats
// never sees them zeroed before the count is done.
// The counters are right once the count is done: an archive committed
// after snap is counted by its Commit and not seen by snap, one deleted
// after snap is subtracted by deleteBlob and counted here. Hence snap must
// be taken before any Commit or deleteBlob can change the counters (while
// Open runs, or under dbmu's write lock). Close and Shutdown stop the
// count and wait for it.
//
// The chunks that no commit record refers to in snap are those of writes
// that an earlier process (or this one while its database was read-only)
// did not commit: snap is taken before this process writes any chunk.
// Finding them in the same pass as the count spares cleanOrphans' second
// pass over every record.
func (s *Blobs) startCount(snap *badger.Txn, reset bool, then func(orphans map[string]int)) {
	ctx, cancel := context.WithCancel(context.Background())
	c := counting{done: make(chan struct{}), stop: cancel, exited: make(chan struct{})}
	s.mu.Lock()
	s.count = c
	if reset {
		s.archives, s.bytes, s.marked = 0, 0, 0
	}
	s.mu.Unlock()
	go func() {
		defer close(c.exited)
		orphans, err := s.countArchives(ctx, snap, then != nil)
		close(c.done)
		switch {
		case errors.Is(err, ErrClosed) || ctx.Err() != nil:
			return
		case err != nil:
			s.log.Error("counting the cached archives: the cache's totals and size limit count only those committed since", "error", err)
		}
		if then != nil {
			then(orphans)
		}
		// Reading every record left garbage in proportion to the cache,
		// which the Go runtime would keep for minutes, and the tables
		// mapped.
		s.db.releaseReadPages()
		debug.FreeOSMemory()
	}()
}

// ReleaseReadPages has the kernel take back the pages of the database's
// table files that this process has read. A pass over every record (the
// count at Open, the engine's own at start-up) otherwise leaves the whole
// LSM tree resident in the process, in proportion to the cache, though
// little of it is read again soon; what is read again afterwards is read
// from the files. Linux only (MADV_PAGEOUT, Linux 5.4 and later);
// elsewhere, and in memory, it does nothing.
func (s *Store) ReleaseReadPages() { s.db.releaseReadPages() }

// stopCounting stops the count under way and what follows it, if any,
// and waits for them.
func (s *Blobs) stopCounting() {
	s.mu.Lock()
	c := s.count
	s.mu.Unlock()
	if c.stop == nil {
		return
	}
	c.stop()
	<-c.exited
}

// statsNow is Stats without waiting for the count: the totals so far.
func (s *Blobs) statsNow() (archives int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.archives, s.bytes
}

// occupied is the size of the committed archives and of the chunks being
// staged, read together: a commit moves an archive from one to the other
// under s.mu.
func (s *Blobs) occupied() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes + s.staging.Load()
}

// counted waits until the archives are counted.
func (s *Blobs) counted() {
	s.mu.Lock()
	done := s.count.done
	s.mu.Unlock()
	if done != nil {
		<-done
	}
}

// countArchives adds the archives snap sees to the counters and the LRU,
// and discards snap. With orphans, it also returns the stages of the
// chunks snap sees that no commit record in snap refers to (non-nil when
// it succeeded).
func (s *Blobs) countArchives(ctx context.Context, snap *badger.Txn, orphans bool) (map[string]int, error) {
	defer snap.Discard()
	var stages map[string]int
	var n, damaged int
	var total int64
	err := s.db.withDB(func() error {
		if orphans {
			stages = chunkStages(snap)
		}
		it := snap.NewIterator(badger.IteratorOptions{Prefix: []byte("b/")})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if n%1024 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			// Only eviction needs every archive's entry in the LRU.
			var rec lruRecord
			dst := any(&rec.countedRecord)
			if s.evict.lru.max > 0 {
				dst = &rec
			}
			if err := it.Item().Value(func(val []byte) error { return json.Unmarshal(val, dst) }); err != nil {
				return err
			}
			n++
			total += rec.Size
			delete(stages, rec.Stage)
			if rec.Damaged {
				damaged++
			}
			if s.evict.lru.max > 0 {
				s.evict.lru.add(strings.TrimPrefix(string(it.Item().Key()), "b/"), rec.Created)
			}
		}
		return nil
	})
	if h := s.hooks.recounted; h != nil {
		h()
	}
	if damaged > 0 {
		// Each is refused when it is asked for (its record says so);
		// the operator hears of them at every start, not only once.
		s.log.Error("cached archives found damaged where they are stored are kept and not served: those that can be fetched again are replaced when asked for; run tfmirror cache verify to name them, and re-import or prune the others",
			"archives", damaged)
	}
	s.mu.Lock()
	s.archives += n
	s.marked += damaged
	s.bytes += total
	s.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("cache: counting archives: %w", err)
	}
	return stages, nil
}

// countNow counts the archives of the open database before returning
// (the read-only start-up, which must know whether the database can be
// read at all).
func (s *Blobs) countNow() error {
	snap := s.db.bdb.NewTransaction(false)
	c := counting{done: make(chan struct{})}
	s.mu.Lock()
	s.count = c
	s.mu.Unlock()
	defer close(c.done)
	_, err := s.countArchives(context.Background(), snap, false)
	return err
}
