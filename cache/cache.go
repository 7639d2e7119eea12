// Package cache is what tfmirror keeps on disk: one Badger database that
// holds metadata records (Records: small JSON documents under a key) and
// archives (Blobs: content-addressed by sha256, stored in chunks, visible
// only once committed whole). A Store is the two over that one database,
// with the disk they share: it writes only above a free-space reserve,
// keeps the archives within a size limit by evicting the least recently
// used, and returns the space of deleted archives to the disk. It is safe
// for concurrent use without help from its callers.
//
// It is not an HTTP cache: it knows nothing of HTTP, origins or
// signatures, and what a record or an archive means is its callers'.
//
// The keys and values are the on-disk format, which upgrades read as
// they are (mirror/upgrade_test.go):
//
//	m/<key>          metadata record {"t": stored-at, "v": document}
//	c/<stage>/<idx>  chunk idx (%08x) of the staging area <stage>
//	b/<sha256>       archive commit record: size, chunk size and count, stage, h1, and
//	                 "damaged": true once a read found its stored bytes damaged
//	p/ping           Ping's probe
//	x/flush          written and dropped to flush the memtable (gc.go)
//	a/settle         empty, written by every flush after deletions with z/settle: the
//	z/settle         table flushed spans every key, and so does its compaction (gc.go)
package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/tfmirror/tfmirror/v2/cache/internal/disk"
)

// ErrNotFound is returned when a metadata document or blob is absent.
var ErrNotFound = errors.New("not found in cache")

// DefaultChunkSize is the chunk size when Options.ChunkSize is zero.
const DefaultChunkSize = 1 << 20

// DefaultMaxUnstagedBytes is Options.MaxUnstagedBytes when it is zero.
const DefaultMaxUnstagedBytes = 256 << 20

// ErrChunkDropped is returned by BlobWriter.ReadAt for bytes of a download
// in progress that could be neither stored nor kept in memory (a full disk
// and Options.MaxUnstagedBytes reached).
var ErrChunkDropped = errors.New("cache: part of this download was neither stored (cache not writable) nor kept in memory (unstaged-memory limit reached)")

// Options configures Open.
type Options struct {
	// Dir is the Badger directory. Required unless InMemory.
	Dir string
	// InMemory keeps everything in memory (tests).
	InMemory bool
	// ChunkSize is the largest value stored for an archive. Default 1 MiB.
	ChunkSize int
	// Logger receives Badger's warnings and errors. Default: discard.
	Logger *slog.Logger
	// MaxBytes bounds the total size of archives, committed and being
	// written: once the total is over it, the least recently used
	// committed archives are evicted, in the background, until it is at
	// most MaxBytes. Archives open for reading or still being written are
	// never evicted. It also sets the data directory's disk budget
	// (budget.go) and the size of Badger's value-log files
	// (valueLogFileSizeFor). Default 0: unlimited.
	MaxBytes int64
	// OnEvict, if set, is called once for every archive evicted to stay
	// under MaxBytes (for metrics). Default: none.
	OnEvict func(BlobInfo)
	// OnDamaged, if set, is called once for every stored archive a read
	// found damaged (ErrDamaged; for metrics), when it is logged.
	// Default: none.
	OnDamaged func()
	// Evictable says which archives MaxBytes may evict until
	// SetEvictable replaces it: those for which it returns true. A store
	// whose owner knows what cannot be fetched again only once it has
	// read the store passes a function that returns false, so that the
	// eviction at Open removes nothing. Default nil: every archive.
	Evictable func(sha string) bool
	// MaxUnstagedBytes bounds the memory held, across all downloads in
	// progress, for archive chunks that could not be written to Badger
	// (a full disk): such chunks are kept in memory so that clients
	// streaming the download still get every byte. A chunk beyond the
	// bound is not kept, and a reader that still needs it gets
	// ErrChunkDropped; readers that are past it and the download itself
	// go on. Default DefaultMaxUnstagedBytes; negative: keep none.
	MaxUnstagedBytes int64
	// DiskReserve is the free space below which the cache writes nothing
	// (ErrNotWritable); the size of Badger's LSM tree is added to it.
	// Default DefaultDiskReserve; negative: free space is not checked.
	// Ignored InMemory.
	DiskReserve int64
	// FreeSpace returns the bytes free on the file system holding dir.
	// Default: statfs (blocks available to unprivileged users).
	FreeSpace func(dir string) (int64, error)
	// SpaceCheckInterval is how often free space is asked for: writes use
	// an answer at most this old (minus what they wrote since), and a
	// store that stopped writing checks at this interval whether it may
	// write again. Default DefaultSpaceCheckInterval.
	SpaceCheckInterval time.Duration
	// CollectAtClose has Shutdown and Close settle the deletions the
	// value-log GC had not settled yet and collect the value log, for at
	// most a few seconds, before the database closes: for a command that
	// exits right after its last deletions, whose space would otherwise
	// wait for the next Open. Default false: a serve's next start
	// collects it, and its shutdown is not made longer.
	CollectAtClose bool
	// FailWrites is for tests and fault injection only: when set, it is
	// called before each archive chunk and metadata document is written,
	// and an error it returns is treated as a failed write (as on a full
	// disk). Default nil.
	FailWrites func() error
}

// Store is an open cache: its Records and its Blobs, which share one
// Badger database, and the disk under it. Open starts, and Shutdown or
// Close stops, what keeps them (Store's own methods): the free-space
// watch that turns writes off below the reserve and reopens the database
// read-write when room returns, the value-log GC that returns the space
// of deleted archives to the disk (gc.go), and, with a size limit, the
// eviction goroutine. After Shutdown or Close every method fails with
// ErrClosed.
type Store struct {
	*Records // metadata records
	*Blobs   // archives

	db        *database
	writers   *writerGate // of both: Shutdown refuses new ones and waits for those open
	gc        *valueLogGC
	stopWatch context.CancelFunc
	watchDone chan struct{}
	reopen    reopenBackoff      // watch's own
	stopGC    context.CancelFunc // of the value-log GC goroutine (gc.go)
	gcDone    chan struct{}
	collect   bool // Options.CollectAtClose

	hooks *testHooks // shared with the parts; set by tests only
}

// testHooks let tests stop the store at the points where concurrent
// callers interleave. Every field is nil outside tests.
type testHooks struct {
	// recordRead is called by Commit after it found no commit record and
	// before it writes one, and by deleteBlob after it read the record and
	// before it deletes it.
	recordRead func(sha string)
	// recordWaits is called by Commit and deleteBlob when they must wait
	// for another Commit or deleteBlob of the same sha256 to finish.
	recordWaits func(sha string)
	// shutdownWaits is called when Shutdown starts waiting for writers,
	// closeWaits when Shutdown or Close waits for operations under way.
	shutdownWaits, closeWaits func()
	// evicting is called by the eviction goroutine when it has picked an
	// archive to delete, and by EvictBlob when it has claimed one, before
	// either deletes it; evictStopWaits when Close or Shutdown is about to
	// stop and wait for that goroutine.
	evicting       func(sha string)
	evictStopWaits func()
	// pingWrite is called by Ping before its probe writes; an error it
	// returns is the write's.
	pingWrite func() error
	// recounted is called by a count after it read the commit records
	// and before it adds them to the counters; dbWaits when a database access
	// must wait for the database to be reopened.
	recounted, dbWaits func()
	// settled is called by the value-log GC after each settle of
	// deletions (gc.go).
	settled func()
}

// Open opens (creating if needed) the store in opts.Dir, rebuilds its
// counters and removes chunks that an interrupted process left behind.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" && !opts.InMemory {
		return nil, errors.New("cache: a directory is required")
	}
	if opts.ChunkSize <= 0 {
		opts.ChunkSize = DefaultChunkSize
	}
	if opts.InMemory {
		// In memory, values live in the LSM tree, where they must be
		// smaller than the value threshold (1 MiB at most).
		opts.ChunkSize = min(opts.ChunkSize, 512<<10)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxUnstagedBytes == 0 {
		opts.MaxUnstagedBytes = DefaultMaxUnstagedBytes
	}
	hooks := &testHooks{}
	db := newDatabase(opts, hooks)
	writers := &writerGate{active: make(map[string]bool), maxUnstaged: opts.MaxUnstagedBytes}
	s := &Store{
		Records: &Records{db: db, writers: writers, failWrites: opts.FailWrites},
		Blobs:   newBlobs(opts, db, writers, hooks),
		db:      db, writers: writers, hooks: hooks, collect: opts.CollectAtClose,
	}
	s.gc = &valueLogGC{db: db, budget: &s.budget, archiveBytes: func() int64 { _, n := s.statsNow(); return n }}

	// The directory is this store's from here on, whichever way it is
	// opened below, or not opened at all: read-only, Badger would share
	// its lock with a second process, and without a database it would
	// hold none.
	if !opts.InMemory {
		if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("cache: opening %s: %w", opts.Dir, err)
		}
		lock, err := disk.LockDir(opts.Dir, lockWait)
		if err != nil {
			return nil, fmt.Errorf("cache: opening %s: %w", opts.Dir, err)
		}
		db.dirLock = lock
		db.bopts = db.bopts.WithBypassLockGuard(lock.Held())
	}
	if db.space.Refresh(sstBytes(opts.Dir)) {
		bdb, err := db.openReplaying()
		if err != nil {
			db.dirLock.Release()
			return nil, fmt.Errorf("cache: opening %s: %w", opts.Dir, err)
		}
		db.bdb = bdb
		// Counted beside the requests; cleaning up and trimming follow.
		s.startCount(bdb.NewTransaction(false), false, s.afterWritableOpen)
	} else if err := s.openReadOnly(); err != nil {
		db.dirLock.Release()
		return nil, fmt.Errorf("cache: opening %s: %w", opts.Dir, err)
	}
	s.evict.start()
	s.startGC(opts)
	if !db.space.Disabled() {
		ctx, cancel := context.WithCancel(context.Background())
		s.stopWatch, s.watchDone = cancel, make(chan struct{})
		go s.watch(ctx)
	}
	return s, nil
}

// badgerOptions are the options of the Badger database under a store.
func badgerOptions(opts Options) badger.Options {
	// Badger takes no value larger than a write batch, 15% of a memtable;
	// in memory, values live in the LSM tree: they must be smaller than
	// the value threshold, which may not exceed 1 MiB.
	valueThreshold, memtable := int64(64<<10), int64(memTableSize)
	dir := opts.Dir
	if opts.InMemory {
		valueThreshold, memtable = 1<<20, 8<<20
		dir = ""
	}
	return badger.DefaultOptions(dir).
		WithInMemory(opts.InMemory).
		WithLogger(badgerLogger{opts.Logger}).
		// A small, flat memory footprint: archive chunks go to the value
		// log, only keys and small documents live in the LSM tree. These
		// sizes decide DefaultDiskReserve (space.go).
		WithMemTableSize(memtable).
		WithNumMemtables(numMemtables).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(8).
		WithBlockCacheSize(blockCacheSize).
		// Tables are not encrypted: their indexes are read where they
		// are mapped, and Badger would use an index cache for nothing.
		WithIndexCacheSize(0).
		WithValueLogFileSize(valueLogFileSizeFor(opts.MaxBytes)).
		WithValueThreshold(valueThreshold).
		WithBaseTableSize(baseTableSize).
		WithNumCompactors(2).
		// The L0 tables (the memtables flushed at Close among them) are
		// compacted at Close, so that the next start does not compact
		// them beside its passes over every record, in buffers that
		// Badger keeps pooled for seconds after (tens of MiB at 100,000
		// archives). Like any compaction, it writes at most the LSM
		// tree's size, which the reserve covers (space.go).
		WithCompactL0OnClose(true).
		// A byte a failing disk changed is an error, never part of an
		// archive served: every table block read from disk (small
		// documents, an archive's last chunk under the value threshold)
		// is checked against its checksum. Archive chunks are checked by
		// the store itself against the checksums their writer recorded
		// (chunksums.go), in the pass that copies them: Badger's check of
		// every value it reads from the value log, a pass of its own over
		// the chunk, cost half the speed of reading an archive
		// (BenchmarkBlobRead: 4.2 GB/s with it, 8.5 GB/s with the store's).
		WithVerifyValueChecksum(false).
		WithChecksumVerificationMode(options.OnBlockRead).
		WithNumVersionsToKeep(1).
		WithDetectConflicts(false)
}

// lockWait is how long Open waits for the directory lock (disk.LockDir,
// or Badger's where that takes none).
const lockWait = 2 * time.Second

// openBadger opens Badger, waiting up to lockWait for its directory lock
// where Badger takes it (disk.LockDir says why it may be held a moment):
// where the store holds it, Badger is opened without its lock guard.
func openBadger(opts badger.Options) (*badger.DB, error) {
	db, err := badger.Open(opts)
	for deadline := time.Now().Add(lockWait); err != nil && !opts.InMemory &&
		strings.Contains(err.Error(), "Cannot acquire directory lock") && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		db, err = badger.Open(opts)
	}
	return db, err
}
