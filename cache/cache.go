// Package cache owns everything tfmirror keeps on disk, in one Badger
// database: small metadata documents (version lists, verified package
// metadata) and provider archives.
//
// Archives ("blobs") are content-addressed by the lowercase hex sha256 of
// their bytes and stored in chunks of at most Options.ChunkSize bytes, so
// that no single value is large and memory stays flat whatever the archive
// size. The key layout is:
//
//	m/<key>               metadata envelope {"t": stored-at, "v": document}
//	c/<stage>/<idx>       chunk idx (%08x) of the staging area <stage>
//	b/<sha256>            blob commit record: size, chunk size and count, stage, h1
//
// A BlobWriter stages chunks under a fresh random stage id as they arrive.
// Only Commit makes a blob visible: it checks the digest, writes the last
// chunk, syncs, and then writes the commit record, last. A crash at any
// point therefore leaves either a complete blob or unreferenced chunks,
// which cleanOrphans removes (it runs soon after Open, in the background,
// once the archives are counted). Partial archives are never returned by
// OpenBlob.
//
// Badger writes through memory-mapped files, where a full disk is not an
// error but SIGBUS. So the store writes only while the file system has
// more free space than Options.DiskReserve (plus the LSM tree's size): it
// checks before every write, cheaply (statfs at most every
// Options.SpaceCheckInterval, bytes admitted since accounted), and below
// the reserve every write fails with ErrNotWritable without touching
// Badger. A store opened on a disk already below the reserve opens the
// database read-only (or, if Badger cannot open it read-only, not at all:
// every lookup misses) and reopens it read-write once there is room.
//
// With Options.MaxBytes set, the least recently used archives are evicted
// once a commit has taken the archives over the limit, until they fit, by
// a goroutine of the store's (no caller waits for it); archives open for
// reading or whose writer is not yet closed are never evicted. The data
// directory is then kept within a disk budget of 1.25 times the limit
// plus the reserve: a chunk that would take it over waits for value-log
// GC to return the space of evicted archives (budget.go).
//
// OpenBlob and NewBlobWriter return the small interfaces BlobReader and
// BlobWriter, not the concrete types, so that another tier (an object
// store, later) can offer the same methods with readers and writers of its
// own that wrap these, and a caller's Store interface (proxy's) fits both
// tiers unchanged. They are declared here, with the contract every
// implementation keeps (reads while writing, what Commit guarantees),
// rather than by each consumer: a consumer-side declaration could not be
// named in the Store's method results, so no second tier could fit it.
//
// The Store is safe on its own: any number of writers of one sha256 may
// commit concurrently (one record is kept, see BlobWriter.Commit), and
// Shutdown lets open writers finish before closing Badger, after which
// every method fails with ErrClosed.
//
// The package knows nothing of HTTP, origins or signatures.
package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
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
	// FailWrites is for tests and fault injection only: when set, it is
	// called before each archive chunk and metadata document is written,
	// and an error it returns is treated as a failed write (as on a full
	// disk). Default nil.
	FailWrites func() error
}

// Store is the cache. It is safe for concurrent use.
type Store struct {
	bopts     badger.Options
	chunkSize int
	log       *slog.Logger
	bufs      sync.Pool

	mu       sync.Mutex
	active   map[string]bool // stage ids of writers not yet closed
	closing  bool            // Shutdown or Close began: no new writers
	drained  chan struct{}   // closed when active empties while closing
	archives int
	bytes    int64
	count    counting // of the archives, after the database opened

	// unstaged is the memory held by writers for chunks that could not
	// be stored, at most maxUnstaged.
	unstaged    int64
	maxUnstaged int64

	// stageHook, when set (Options.FailWrites, tests), is called before
	// each chunk and metadata document is written; an error it returns is
	// treated as a Badger write failure.
	stageHook func() error

	lru   lru       // access order, references and eviction of committed blobs
	stats *statMemo // StatBlob answers

	// dbmu guards db and readOnly: every use of db holds it for reading;
	// reopening read-write holds it for writing.
	dbmu     sync.RWMutex
	db       *badger.DB // nil: not open (disk full at start-up and not readable)
	readOnly bool       // db was opened read-only (disk full at start-up)

	space  space
	budget diskBudget // of the data directory, with a size limit
	// staging is the size of the chunks that writers not yet committed
	// nor closed have stored: the size limit counts them too.
	staging atomic.Int64
	gcKick  chan struct{} // asks RunGC for a round now
	// deletes counts the deletions of archive chunks since RunGC last
	// settled them (gc.go); writeMu is held for reading by every write of
	// the store, and for writing while RunGC has Badger refuse writes.
	deletes   atomic.Int64
	writeMu   sync.RWMutex
	stopWatch context.CancelFunc
	watchDone chan struct{}

	// The eviction goroutine (evict.go): kicked when the archives may be
	// over MaxBytes, stopped by Close and Shutdown; evictFlush asks it for
	// a pass and is answered when the pass is over (tests).
	evictKick  chan struct{}
	evictFlush chan chan struct{}
	stopEvict  context.CancelFunc
	evictDone  chan struct{}

	// blobLocks serialise, per sha256, the read-then-write of a blob's
	// commit record together with the counters and LRU entry that follow
	// it (Commit, deleteBlob): see lockBlob.
	blobLocks [256]sync.Mutex

	// gate counts the database operations under way and refuses new ones
	// once the store is closed (close.go).
	gate opGate

	// ping is Ping's memo; lastWrite is when a write to Badger last
	// succeeded (UnixNano, 0: none yet), which Ping takes as its answer;
	// writes counts the writes tried (tests).
	ping      pingState
	lastWrite atomic.Int64
	writes    atomic.Int64

	hooks testHooks // set by tests only
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
	// archive to delete, before it deletes it; evictStopWaits when Close
	// or Shutdown is about to stop and wait for that goroutine.
	evicting       func(sha string)
	evictStopWaits func()
	// pingWrite is called by Ping before its probe writes; an error it
	// returns is the write's.
	pingWrite func() error
	// recounted is called by a count after it read the commit records
	// and before it adds them to the counters; dbWaits when a database access
	// must wait for the database to be reopened.
	recounted, dbWaits func()
}

// lockBlob locks the commit record of sha (a checked sha256) and returns
// the unlock function.
//
// A lock, rather than Badger's conflict detection: detection is a
// database-wide option that makes every transaction, archive chunks
// included, track its reads, and a conflicting commit would still have to
// be retried; and the counters (Stats) and the LRU entry live outside
// Badger, so they would need a lock of their own anyway. Badger's
// directory lock keeps other processes out, so a lock in the Store covers
// every writer. The locks are striped by the first byte of the sha256:
// 256 mutexes, no map to grow or clean, and records of different archives
// rarely wait for each other (and then only for one small write).
func (s *Store) lockBlob(sha string) (unlock func()) {
	m := &s.blobLocks[hexNibble(sha[0])<<4|hexNibble(sha[1])]
	if !m.TryLock() {
		if h := s.hooks.recordWaits; h != nil {
			h(sha)
		}
		m.Lock()
	}
	return m.Unlock
}

func hexNibble(c byte) byte {
	if c >= 'a' {
		return c - 'a' + 10
	}
	return c - '0'
}

// errNoDB is what reads get while the database is not open: a miss.
var errNoDB = fmt.Errorf("%w (the cache could not be opened: disk full at start-up)", ErrNotFound)

// Open opens (creating if needed) the store in opts.Dir, rebuilds its
// counters and removes chunks that an interrupted process left behind.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" && !opts.InMemory {
		return nil, errors.New("cache: a directory is required")
	}
	if opts.ChunkSize <= 0 {
		opts.ChunkSize = DefaultChunkSize
	}
	// In memory, values live in the LSM tree: they must be smaller than
	// the value threshold, which may not exceed 1 MiB.
	// Badger takes no value larger than a write batch, 15% of a memtable.
	valueThreshold, memtable := int64(64<<10), int64(memTableSize)
	if opts.InMemory {
		valueThreshold, memtable = 1<<20, 8<<20
		opts.ChunkSize = min(opts.ChunkSize, 512<<10)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	dir := opts.Dir
	if opts.InMemory {
		dir = ""
	}
	bopts := badger.DefaultOptions(dir).
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
		WithNumVersionsToKeep(1).
		WithDetectConflicts(false)
	s := &Store{bopts: bopts, chunkSize: opts.ChunkSize, log: opts.Logger, active: make(map[string]bool),
		stageHook: opts.FailWrites, maxUnstaged: opts.MaxUnstagedBytes, gcKick: make(chan struct{}, 1),
		stats: newStatMemo(), evictKick: make(chan struct{}, 1), evictFlush: make(chan chan struct{})}
	if s.maxUnstaged == 0 {
		s.maxUnstaged = DefaultMaxUnstagedBytes
	}
	s.space = space{dir: opts.Dir, free: opts.FreeSpace, reserve: opts.DiskReserve,
		interval: opts.SpaceCheckInterval, log: opts.Logger, now: time.Now}
	if s.space.free == nil {
		s.space.free = statfsFree
	}
	if s.space.reserve == 0 {
		s.space.reserve = DefaultDiskReserve
	}
	if s.space.interval <= 0 {
		s.space.interval = DefaultSpaceCheckInterval
	}
	if opts.InMemory {
		s.space.reserve = -1
	}
	s.lru.init(opts.MaxBytes, opts.OnEvict, opts.Evictable)
	if opts.MaxBytes > 0 && !opts.InMemory {
		reserve := s.space.reserve
		if reserve < 0 {
			reserve = DefaultDiskReserve
		}
		s.budget = diskBudget{dir: opts.Dir, wait: budgetWait, gcRoom: bopts.ValueLogFileSize, limit: func() int64 {
			base := opts.MaxBytes
			if s.lru.unmet.Load() {
				// Over the limit with nothing left that may be evicted:
				// the budget follows what is kept, and what is being
				// written (an import of what cannot be fetched again).
				_, committed := s.statsNow()
				base = max(base, committed+s.staging.Load())
			}
			return base + base/4 + reserve
		}}
	}
	s.bufs.New = func() any { b := make([]byte, 0, s.chunkSize); return &b }

	if s.space.refresh(sstBytes(opts.Dir)) {
		db, err := openBadger(bopts)
		if err != nil {
			return nil, fmt.Errorf("cache: opening %s: %w", opts.Dir, err)
		}
		s.db = db
		// Counted beside the requests; cleaning up and trimming follow.
		s.startCount(db.NewTransaction(false), false, s.afterWritableOpen)
	} else {
		s.openReadOnly()
	}
	s.startEvicting()
	if !s.space.disabled() {
		ctx, cancel := context.WithCancel(context.Background())
		s.stopWatch, s.watchDone = cancel, make(chan struct{})
		go s.watch(ctx)
	}
	return s, nil
}

// lockWait is how long openBadger waits for the directory lock.
const lockWait = 2 * time.Second

// openBadger opens Badger, waiting up to lockWait for its directory lock:
// a process that closed the cache a moment ago can still hold the lock
// through a child it forked while the lock file was open (the child
// closes it on exec), which is over in milliseconds; a tfmirror that
// really holds the directory still fails after lockWait.
func openBadger(opts badger.Options) (*badger.DB, error) {
	db, err := badger.Open(opts)
	for deadline := time.Now().Add(lockWait); err != nil && !opts.InMemory &&
		strings.Contains(err.Error(), "Cannot acquire directory lock") && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		db, err = badger.Open(opts)
	}
	return db, err
}
