package cache

import (
	"errors"
	"log/slog"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache/internal/disk"
)

// ErrNotWritable is returned by every write (and by Ping) while the cache
// does not write: the file system holding it has less free space than the
// reserve, or the database could only be opened read-only (or not at all)
// because the disk was full at start-up. Nothing was written to Badger.
var ErrNotWritable = errors.New("cache not writable")

// WriteFailureLevel is the level at which a caller logs a write to the
// cache that failed with err: slog.LevelDebug when the cache refused it
// for being below its disk reserve (ErrNotWritable, but for a refusal of
// the disk budget, ErrOverBudget), a state the cache logs itself once as
// it begins and once as it ends, and which the metrics and /readyz show;
// slog.LevelError otherwise. Below the reserve every request would
// otherwise log its own error.
func WriteFailureLevel(err error) slog.Level {
	if errors.Is(err, ErrNotWritable) && !errors.Is(err, ErrOverBudget) {
		return slog.LevelDebug
	}
	return slog.LevelError
}

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
	// the value-log GC uses) before it deletes the file, which is the room GC needs.
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
// valueLogFileSize more is free (see valueLogGC). Hence 10 MiB.
const DefaultDiskReserve = numMemtables*memTableSize + discardStatsSize + newFileSlack

// DefaultSpaceCheckInterval is Options.SpaceCheckInterval when it is zero.
const DefaultSpaceCheckInterval = time.Second

// entryCost is what writing a key and value costs on disk at most: the
// value and key in the value log or write-ahead log, with their headers,
// and a value pointer with its header in the write-ahead log.
func entryCost(key, value int) int64 { return int64(value) + 2*int64(key+64) }

// Headroom is how many bytes others may still write to the cache's file
// system (an import unpacking a bundle beside it) before the free space
// reaches the reserve (DiskReserve plus the LSM tree), less the cache's
// own writes admitted but not yet on disk; asked of the file system now,
// so it may be negative. ok is false when free space is not checked
// (a negative DiskReserve, or no way to ask).
func (s *Store) Headroom() (room int64, ok bool) { return s.db.space.Headroom() }

// FreeSpace is the free space on dir's file system that this process may
// use (a directory not created yet is on its parent's), as the cache
// measures its own; an error where that cannot be asked.
func FreeSpace(dir string) (int64, error) { return disk.Free(dir) }
