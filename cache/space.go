package cache

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
)

// ErrNotWritable is returned by every write (and by Ping) while the cache
// does not write: the file system holding it has less free space than the
// reserve, or the database could only be opened read-only (or not at all)
// because the disk was full at start-up. Nothing was written to Badger.
var ErrNotWritable = errors.New("cache not writable")

// The Badger options Open uses that decide how much Badger may write to
// disk on its own. Badger writes its value log, write-ahead logs and
// tables through memory-mapped files that it extends (sparsely) before
// writing them; a page written where the file system has no block left
// arrives as SIGBUS, which kills the process. So every byte Badger may
// write must be known to fit before the write that causes it.
const (
	// memTableSize is Badger's MemTableSize: a memtable is flushed to an
	// L0 table of about this size once its write-ahead log holds this much.
	// Archive chunks go to the value log, so a memtable holds keys, value
	// pointers and small documents: 4 MiB is plenty. Each memtable is an
	// arena of about 1.3 times this on the Go heap, and every settle after
	// deletions (gc.go) replaces it: with Badger's 64 MiB, or even 16 MiB,
	// that churn alone took anonymous memory to 150 MiB under churn.
	memTableSize = 4 << 20
	// numMemtables is Badger's NumMemtables: how many memtables (the
	// mutable one and those waiting to be flushed) exist at once.
	numMemtables = 2
	// valueLogFileSize is Badger's ValueLogFileSize. A value-log file is
	// mapped at twice this size and a new one started once it holds this
	// much. It is also the most that one value-log GC round rewrites (the
	// live part of a file, at most half of it with the discard ratio 0.5
	// RunGC uses) before it deletes the file, which is the room GC needs.
	// 64 MiB rather than 256 MiB: GC needs that much room on top of the
	// reserve to run at all, so on a disk that filled up the space of
	// evicted archives can still be reclaimed; and deleted archives are
	// reclaimed file by file, so smaller files return space sooner. The
	// cost is four times as many files (one descriptor and one mapping
	// each: 16 Ki for 1 TiB of archives).
	// With a size limit, files are smaller still (valueLogFileSizeFor),
	// down to minValueLogFileSize.
	valueLogFileSize    = 64 << 20
	minValueLogFileSize = 4 << 20
	// baseTableSize is Badger's BaseTableSize, the size of the LSM tree's
	// tables at its top level (twice that a level down). A compaction
	// builds up to 8 tables at once, each in a buffer of twice the
	// table's size that Badger keeps pooled afterwards: with Badger's
	// 2 MiB that was 60 to 90 MiB of memory in use as soon as a large
	// tree (100,000 archives) was compacted. Smaller tables only mean
	// more, smaller files for a tree that holds keys and small documents.
	baseTableSize = 512 << 10
	// blockCacheSize is Badger's BlockCacheSize: decompressed blocks of
	// the LSM tree's tables, kept for reads that the engine's memos do
	// not answer.
	blockCacheSize = 8 << 20
	// discardStatsSize is the size of Badger's DISCARD file, mapped and
	// written page by page as value-log files gain garbage.
	discardStatsSize = 1 << 20
	// newFileSlack covers the first page Badger writes into every new
	// write-ahead-log and value-log file, MANIFEST appends, and the
	// per-entry headers our accounting (entryCost) only estimates.
	newFileSlack = 1 << 20
)

// valueLogFileSizeFor is the value-log file size for a size limit: a
// sixteenth of it, between minValueLogFileSize and valueLogFileSize. A
// file is the unit in which the space of evicted archives comes back, so
// a small cache that churns needs small files to stay within its disk
// budget (budget.go); a file count of about 16 to 20 is still few.
func valueLogFileSizeFor(maxBytes int64) int64 {
	if maxBytes <= 0 {
		return valueLogFileSize
	}
	return min(max(maxBytes/16, minValueLogFileSize), valueLogFileSize)
}

// DefaultDiskReserve is Options.DiskReserve when it is zero: the room
// Badger may need on disk beyond the writes the store admits itself.
// Every write of the store is admitted only when it fits above the
// reserve, and each is accounted (entryCost) until the next statfs. What
// Badger writes on its own, later, because of writes already made is:
//
//   - memtable flushes: each full memtable (numMemtables of them at most)
//     becomes an L0 table of up to memTableSize before its write-ahead log
//     is deleted: numMemtables × memTableSize = 8 MiB;
//   - the DISCARD file (discardStatsSize, 1 MiB) and the first pages of new
//     write-ahead-log and value-log files (newFileSlack, 1 MiB);
//   - compactions, which write their output tables before they delete
//     their inputs: at most the size of the LSM tree (keys and small
//     documents, not archive chunks). That size changes, so it is not in
//     the constant: the store adds the current LSM size to the reserve.
//
// Value-log GC is not covered by the reserve: it runs only when
// valueLogFileSize more is free (see RunGC). Hence 10 MiB.
const DefaultDiskReserve = numMemtables*memTableSize + discardStatsSize + newFileSlack

// DefaultSpaceCheckInterval is Options.SpaceCheckInterval when it is zero.
const DefaultSpaceCheckInterval = time.Second

// entryCost is what writing a key and value costs on disk at most: the
// value and key in the value log or write-ahead log, with their headers,
// and a value pointer with its header in the write-ahead log.
func entryCost(key, value int) int64 { return int64(value) + 2*int64(key+64) }

// space decides whether the store may write: it keeps the free bytes the
// file system reported at the last check and the bytes admitted since,
// so that a write costs a subtraction, not a statfs.
type space struct {
	dir      string
	free     func(dir string) (int64, error)
	reserve  int64 // < 0: no checks
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time

	mu       sync.Mutex
	avail    int64     // free bytes at the last check
	checked  time.Time // zero: never
	admitted int64     // bytes admitted since the last check (and those in flight at it)
	inflight int64     // bytes admitted whose write has not returned
	lsm      int64     // LSM tree size, added to the reserve
	known    bool      // the state has been set once
	writable bool
	reason   error // why not writable (wraps ErrNotWritable)
	statErr  error // the last check's failure, if any
}

func (sp *space) disabled() bool { return sp.reserve < 0 }

// floor is the free space below which nothing is written. Caller holds sp.mu.
func (sp *space) floor() int64 { return sp.reserve + sp.lsm }

// resumeAt is how much must be free for a cache that stopped writing to
// write again: the floor and an eighth more, so that the state does not
// flap (and log) on every write near the limit. Caller holds sp.mu.
func (sp *space) resumeAt() int64 { return sp.floor() + sp.floor()/8 }

// check asks the file system for its free space. Caller holds sp.mu.
func (sp *space) check() {
	sp.checked = sp.now()
	sp.admitted = sp.inflight // writes under way may land after the statfs
	free, err := sp.free(sp.dir)
	sp.statErr = err
	if err == nil {
		sp.avail = free
	}
}

// room is the free space not yet promised to admitted writes. Caller holds sp.mu.
func (sp *space) room() int64 { return sp.avail - sp.admitted }

// setWritable changes the state; a change is logged, once. Caller holds sp.mu.
func (sp *space) setWritable(ok bool) {
	if !ok {
		sp.reason = sp.why()
	}
	if sp.known && ok == sp.writable {
		return
	}
	first := !sp.known
	sp.known, sp.writable = true, ok
	if ok {
		sp.reason = nil
		if !first {
			sp.log.Info("cache writable again", "dir", sp.dir, "free_bytes", sp.room(), "reserve_bytes", sp.floor())
		}
		return
	}
	sp.log.Warn("cache not writable: free disk space below the reserve; archives are served but not cached until there is room",
		"dir", sp.dir, "free_bytes", sp.room(), "reserve_bytes", sp.floor(), "error", sp.statErr)
}

// why says why the store does not write. Caller holds sp.mu.
func (sp *space) why() error {
	if sp.statErr != nil {
		return fmt.Errorf("%w: checking free space of %s: %v", ErrNotWritable, sp.dir, sp.statErr)
	}
	return fmt.Errorf("%w: %s free on the file system of %s, below the %s reserve",
		ErrNotWritable, humanize.IBytes(uint64(max(0, sp.room()))), sp.dir, humanize.IBytes(uint64(sp.floor())))
}

// admit promises n bytes to a write about to be made, or returns why it
// may not be made. done must be called with n once the write returned.
func (sp *space) admit(n int64) error {
	if sp.disabled() {
		return nil
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if !sp.known {
		sp.check()
		sp.setWritable(sp.statErr == nil && sp.room() >= sp.resumeAt())
	}
	if !sp.writable {
		// Only the watcher (refresh) makes the store writable again, so
		// that a full disk costs no statfs per write.
		return sp.reason
	}
	if sp.now().Sub(sp.checked) >= sp.interval || sp.room()-n < sp.floor() {
		sp.check()
	}
	if sp.statErr != nil || sp.room()-n < sp.floor() {
		sp.setWritable(false)
		return sp.reason
	}
	sp.admitted += n
	sp.inflight += n
	return nil
}

func (sp *space) done(n int64) {
	if sp.disabled() {
		return
	}
	sp.mu.Lock()
	sp.inflight -= n
	sp.mu.Unlock()
}

// refresh checks the free space now, with lsm the LSM tree's current size,
// and updates the state. It reports whether the store may write.
func (sp *space) refresh(lsm int64) bool {
	if sp.disabled() {
		return true
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.lsm = lsm
	sp.check()
	switch {
	case sp.statErr != nil:
		sp.setWritable(false)
	case sp.writable:
		sp.setWritable(sp.room() >= sp.floor())
	default:
		// Also at start-up, where opening read-write writes itself.
		sp.setWritable(sp.room() >= sp.resumeAt())
	}
	return sp.writable
}

// canWrite reports whether writes are admitted at the moment.
func (sp *space) canWrite() error {
	if sp.disabled() {
		return nil
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if !sp.writable {
		return sp.reason
	}
	return nil
}

// spare reports whether extra bytes beyond the floor are free (for
// value-log GC), by the last check.
func (sp *space) spare(extra int64) bool {
	if sp.disabled() {
		return true
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.writable && sp.statErr == nil && sp.room() >= sp.floor()+extra
}

// freeBytes is the free space at the last check, or -1 when unknown.
func (sp *space) freeBytes() int64 {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.checked.IsZero() || sp.statErr != nil {
		return -1
	}
	return sp.avail
}

// headroom asks the file system now and returns the free space above the
// floor not yet promised to admitted writes; ok is false when it cannot
// tell.
func (sp *space) headroom() (room int64, ok bool) {
	if sp.disabled() {
		return 0, false
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.check()
	if sp.statErr != nil {
		return 0, false
	}
	return sp.room() - sp.floor(), true
}

// Headroom is how many bytes others may still write to the cache's file
// system (an import unpacking a bundle beside it) before the free space
// reaches the reserve (DiskReserve plus the LSM tree), less the cache's
// own writes admitted but not yet on disk; asked of the file system now,
// so it may be negative. ok is false when free space is not checked
// (a negative DiskReserve, or no way to ask).
func (s *Store) Headroom() (room int64, ok bool) { return s.space.headroom() }

// FreeSpace is the free space on dir's file system that this process may
// use (a directory not created yet is on its parent's), as the cache
// measures its own; an error where that cannot be asked.
func FreeSpace(dir string) (int64, error) { return statfsFree(dir) }
