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
// which CleanOrphans removes (it runs at Open). Partial archives are never
// returned by OpenBlob.
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
// reading or whose writer is not yet closed are never evicted.
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
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

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
	// MaxBytes bounds the total size of committed archives: once a commit
	// takes the total over it, the least recently used archives are
	// evicted, in the background, until the total is at most MaxBytes.
	// Archives open for reading or still being written are never evicted.
	// Default 0: unlimited.
	MaxBytes int64
	// OnEvict, if set, is called once for every archive evicted to stay
	// under MaxBytes (for metrics). Default: none.
	OnEvict func(BlobInfo)
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

	space     space
	gcKick    chan struct{} // asks RunGC for a round now
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
	// it (Commit, DeleteBlob): see lockBlob.
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
	// before it writes one, and by DeleteBlob after it read the record and
	// before it deletes it.
	recordRead func(sha string)
	// recordWaits is called by Commit and DeleteBlob when they must wait
	// for another Commit or DeleteBlob of the same sha256 to finish.
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
	valueThreshold := int64(64 << 10)
	if opts.InMemory {
		valueThreshold = 1 << 20
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
		WithMemTableSize(memTableSize).
		WithNumMemtables(numMemtables).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(8).
		WithBlockCacheSize(16 << 20).
		WithIndexCacheSize(16 << 20).
		WithValueLogFileSize(valueLogFileSize).
		WithValueThreshold(valueThreshold).
		WithNumCompactors(2).
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
	s.lru.init(opts.MaxBytes, opts.OnEvict)
	s.bufs.New = func() any { b := make([]byte, 0, s.chunkSize); return &b }

	if s.space.refresh(sstBytes(opts.Dir)) {
		db, err := badger.Open(bopts)
		if err != nil {
			return nil, fmt.Errorf("cache: opening %s: %w", opts.Dir, err)
		}
		s.db = db
		if err := s.recount(); err != nil {
			db.Close()
			return nil, err
		}
		s.afterWritableOpen()
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

// afterWritableOpen removes what interrupted writes left, trims the cache
// to its limit, and has the value-log GC return the space soon.
func (s *Store) afterWritableOpen() {
	if !s.space.refresh(s.lsmSize()) {
		return // retried when there is room (checkSpace)
	}
	if n, err := s.CleanOrphans(); err != nil {
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
	db, err := badger.Open(s.bopts.WithReadOnly(true))
	if err != nil {
		s.log.Warn("disk full at start-up and the cache cannot be opened read-only: serving without the cache until there is room",
			"dir", s.space.dir, "error", quiet(err))
		return
	}
	s.db, s.readOnly = db, true
	if err := s.recount(); err != nil {
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
	db, err := badger.Open(s.bopts)
	if err != nil {
		s.dbmu.Unlock()
		s.log.Error("opening the cache read-write now that there is room", "dir", s.space.dir, "error", quiet(err))
		s.openReadOnlyLocked()
		s.stats.Clear() // answers given while there was no database
		return
	}
	s.db, s.readOnly = db, false
	s.dbmu.Unlock()
	s.stats.Clear() // absences seen without the database
	if err := s.recount(); err != nil {
		s.log.Error("reopening cache", "error", err)
	}
	s.log.Info("cache opened read-write: there is room again", "dir", s.space.dir)
	s.afterWritableOpen()
}

// openReadOnlyLocked retries the read-only database after a failed
// reopen, so that cached archives stay served.
func (s *Store) openReadOnlyLocked() {
	s.dbmu.Lock()
	defer s.dbmu.Unlock()
	if s.db != nil {
		return
	}
	db, err := badger.Open(s.bopts.WithReadOnly(true))
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
		if _, err := s.CleanOrphans(); err != nil {
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
func (s *Store) view(fn func(txn *badger.Txn) error) error {
	return s.withDB(func() error {
		if s.db == nil {
			return errNoDB
		}
		return s.db.View(fn)
	})
}

// withWritable runs fn on the database while the store is open and
// writable.
func (s *Store) withWritable(fn func(db *badger.DB) error) error {
	return s.withDB(func() error {
		if err := s.writableLocked(); err != nil {
			return err
		}
		return fn(s.db)
	})
}

// withDB runs fn while the store is open, with the database lock held for
// reading, so that the database is not swapped or closed under fn.
func (s *Store) withDB(fn func() error) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	s.dbmu.RLock()
	defer s.dbmu.RUnlock()
	return fn()
}

// withRoom runs fn on the writable database if the disk has room for
// cost bytes (entryCost) above the reserve; fn must write no more.
func (s *Store) withRoom(cost int64, fn func(db *badger.DB) error) error {
	return s.withWritable(func(db *badger.DB) error {
		if err := s.space.admit(cost); err != nil {
			return err
		}
		defer s.space.done(cost)
		s.writes.Add(1)
		if err := fn(db); err != nil {
			return err
		}
		s.lastWrite.Store(s.space.now().UnixNano())
		return nil
	})
}

// update runs fn in a read-write transaction that writes at most cost
// bytes (entryCost), if the disk has room for them above the reserve.
func (s *Store) update(cost int64, fn func(txn *badger.Txn) error) error {
	return s.withRoom(cost, func(db *badger.DB) error { return db.Update(fn) })
}

// deleteKeys deletes keys in batches, if the disk has room for the
// tombstones above the reserve.
func (s *Store) deleteKeys(keys [][]byte) error {
	if len(keys) == 0 {
		return nil
	}
	var cost int64
	for _, k := range keys {
		cost += entryCost(len(k), 0)
	}
	return s.withRoom(cost, func(db *badger.DB) error {
		wb := db.NewWriteBatch()
		defer wb.Cancel()
		for _, k := range keys {
			if err := wb.Delete(k); err != nil {
				return err
			}
		}
		return wb.Flush()
	})
}

// sync flushes what was written to disk (writes nothing new).
func (s *Store) sync() error {
	return s.withWritable(func(db *badger.DB) error { return db.Sync() })
}

func (s *Store) kickGC() {
	select {
	case s.gcKick <- struct{}{}:
	default:
	}
}

// envelope is a stored metadata document.
type envelope struct {
	StoredAt time.Time       `json:"t"`
	Value    json.RawMessage `json:"v"`
}

func metaKey(key string) ([]byte, error) {
	if key == "" || len(key) > 1024 {
		return nil, fmt.Errorf("cache: invalid metadata key %q", key)
	}
	for _, r := range key {
		if !unicode.IsPrint(r) {
			return nil, fmt.Errorf("cache: metadata key %q has a non-printable character", key)
		}
	}
	return []byte("m/" + key), nil
}

// PutMeta stores v, JSON-encoded, under key with the current time. It
// fails with ErrClosed once Shutdown or Close began.
func (s *Store) PutMeta(key string, v any) error {
	k, err := metaKey(key)
	if err != nil {
		return err
	}
	if s.refusing() {
		return fmt.Errorf("storing %s: %w", key, ErrClosed)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("cache: encoding %s: %w", key, err)
	}
	doc, err := json.Marshal(envelope{StoredAt: time.Now().UTC(), Value: raw})
	if err != nil {
		return err
	}
	if h := s.stageHook; h != nil {
		if err := h(); err != nil {
			return fmt.Errorf("cache: storing %s: %w", key, err)
		}
	}
	if err := s.update(entryCost(len(k), len(doc)), func(txn *badger.Txn) error { return txn.Set(k, doc) }); err != nil {
		return fmt.Errorf("cache: storing %s: %w", key, err)
	}
	return nil
}

// GetMeta decodes the document stored under key into v and returns when
// it was stored, or ErrNotFound.
func (s *Store) GetMeta(key string, v any) (time.Time, error) {
	k, err := metaKey(key)
	if err != nil {
		return time.Time{}, err
	}
	var env envelope
	err = s.view(func(txn *badger.Txn) error {
		item, err := txn.Get(k)
		if err != nil {
			return err
		}
		return item.Value(func(val []byte) error { return json.Unmarshal(val, &env) })
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return time.Time{}, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("cache: reading %s: %w", key, err)
	}
	if err := json.Unmarshal(env.Value, v); err != nil {
		return time.Time{}, fmt.Errorf("cache: decoding %s: %w", key, err)
	}
	return env.StoredAt, nil
}

// DeleteMeta removes the document under key, if any. It fails with
// ErrClosed once Shutdown or Close began.
func (s *Store) DeleteMeta(key string) error {
	k, err := metaKey(key)
	if err != nil {
		return err
	}
	if s.refusing() {
		return fmt.Errorf("deleting %s: %w", key, ErrClosed)
	}
	return s.update(entryCost(len(k), 0), func(txn *badger.Txn) error { return txn.Delete(k) })
}

// scanBatch is how many documents ScanMeta reads per read transaction.
const scanBatch = 256

// ScanMeta calls fn for every document whose key starts with prefix, in
// key order, until fn returns an error. fn runs outside any transaction
// or lock of the store, so it may call the store itself: documents are
// read in batches, each in a transaction of its own, so a document
// written during the scan may or may not be seen.
func (s *Store) ScanMeta(prefix string, fn func(key string, storedAt time.Time, raw json.RawMessage) error) error {
	type doc struct {
		key string
		env envelope
	}
	p := []byte("m/" + prefix)
	start := p
	for {
		var batch []doc
		err := s.view(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: p, PrefetchValues: false})
			defer it.Close()
			for it.Seek(start); it.Valid() && len(batch) < scanBatch; it.Next() {
				item := it.Item()
				d := doc{key: string(item.Key())}
				if err := item.Value(func(val []byte) error { return json.Unmarshal(val, &d.env) }); err != nil {
					return err
				}
				batch = append(batch, d)
			}
			return nil
		})
		if errors.Is(err, errNoDB) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, d := range batch {
			if err := fn(strings.TrimPrefix(d.key, "m/"), d.env.StoredAt, d.env.Value); err != nil {
				return err
			}
		}
		if len(batch) < scanBatch {
			return nil
		}
		// Resume just after the last key read.
		start = append([]byte(batch[len(batch)-1].key), 0)
	}
}

// BlobInfo describes a committed archive.
type BlobInfo struct {
	SHA256  string    `json:"sha256"`
	Size    int64     `json:"size"`
	H1      string    `json:"h1,omitempty"`
	Created time.Time `json:"created"`
}

// blobRecord is the commit record of a blob.
type blobRecord struct {
	BlobInfo
	ChunkSize int    `json:"chunk_size"`
	Chunks    int    `json:"chunks"`
	Stage     string `json:"stage"`
}

func checkSHA(sha string) error {
	if len(sha) != 64 {
		return fmt.Errorf("cache: %q is not a sha256 in lowercase hex", sha)
	}
	for _, c := range sha {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fmt.Errorf("cache: %q is not a sha256 in lowercase hex", sha)
		}
	}
	return nil
}

func blobKey(sha string) []byte { return []byte("b/" + sha) }

func chunkKey(stage string, idx int) []byte { return fmt.Appendf(nil, "c/%s/%08x", stage, idx) }

func (s *Store) record(txn *badger.Txn, sha string) (blobRecord, error) {
	var rec blobRecord
	item, err := txn.Get(blobKey(sha))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return rec, fmt.Errorf("%w: archive %s", ErrNotFound, sha)
	}
	if err != nil {
		return rec, err
	}
	err = item.Value(func(val []byte) error { return json.Unmarshal(val, &rec) })
	return rec, err
}

// StatBlob returns the committed blob's info, or ErrNotFound.
func (s *Store) StatBlob(sha string) (BlobInfo, error) {
	if err := checkSHA(sha); err != nil {
		return BlobInfo{}, err
	}
	if s.isClosed() {
		return BlobInfo{}, ErrClosed
	}
	e, gen, ok := s.stats.Get(sha)
	if ok {
		if !e.found {
			return BlobInfo{}, fmt.Errorf("%w: archive %s", ErrNotFound, sha)
		}
		return e.info, nil
	}
	var rec blobRecord
	err := s.view(func(txn *badger.Txn) (err error) {
		rec, err = s.record(txn, sha)
		return err
	})
	switch {
	case errors.Is(err, errNoDB):
		// Not remembered: the database may open.
	case err == nil:
		s.stats.Put(sha, gen, statEntry{info: rec.BlobInfo, found: true})
	case errors.Is(err, ErrNotFound):
		s.stats.Put(sha, gen, statEntry{})
	}
	return rec.BlobInfo, err
}

// StatGeneration changes (grows) whenever an answer of StatBlob may have
// changed since: an archive committed or deleted, the database reopened.
// It takes no lock, so callers that keep what they made from StatBlob's
// answers can check cheaply, on every use, that it still holds.
func (s *Store) StatGeneration() uint64 { return s.stats.Generation() }

// OpenBlob opens a committed blob for reading, or returns ErrNotFound.
func (s *Store) OpenBlob(sha string) (BlobReader, error) {
	if err := checkSHA(sha); err != nil {
		return nil, err
	}
	// Take the reference before reading the record, so that eviction,
	// which skips referenced blobs, cannot delete it while it is read.
	if !s.lru.acquire(sha) {
		return nil, fmt.Errorf("%w: archive %s", ErrNotFound, sha)
	}
	var rec blobRecord
	err := s.view(func(txn *badger.Txn) (err error) {
		rec, err = s.record(txn, sha)
		return err
	})
	if err != nil {
		s.lru.release(sha)
		return nil, err
	}
	return &blob{s: s, rec: rec, cached: -1}, nil
}

// DeleteBlob removes a committed blob: its record first, so it is never
// visible half-deleted, then its chunks.
func (s *Store) DeleteBlob(sha string) error {
	if err := checkSHA(sha); err != nil {
		return err
	}
	var rec blobRecord
	unlock := s.lockBlob(sha)
	err := s.update(entryCost(len(blobKey(sha)), 0), func(txn *badger.Txn) (err error) {
		if rec, err = s.record(txn, sha); err != nil {
			return err
		}
		if h := s.hooks.recordRead; h != nil {
			h(sha)
		}
		return txn.Delete(blobKey(sha))
	})
	s.stats.Forget(sha)
	if err == nil {
		s.mu.Lock()
		s.archives--
		s.bytes -= rec.Size
		s.mu.Unlock()
		s.lru.forget(sha)
	}
	unlock()
	if err != nil {
		return err
	}
	return s.deleteChunks(rec.Stage, rec.Chunks)
}

func (s *Store) deleteChunks(stage string, n int) error {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = chunkKey(stage, i)
	}
	return s.deleteKeys(keys)
}

// readChunk copies chunk idx of stage, from byte off on, into p.
func (s *Store) readChunk(stage string, idx int, off int, p []byte) (int, error) {
	var n int
	err := s.view(func(txn *badger.Txn) error {
		item, err := txn.Get(chunkKey(stage, idx))
		if err != nil {
			return err
		}
		return item.Value(func(val []byte) error {
			if off > len(val) {
				return fmt.Errorf("chunk %d is %d bytes, read at %d", idx, len(val), off)
			}
			n = copy(p, val[off:])
			return nil
		})
	})
	if err != nil {
		return 0, fmt.Errorf("cache: reading chunk %d of %s: %w", idx, stage, err)
	}
	return n, nil
}

// Stats returns the number of committed archives and their total size.
func (s *Store) Stats() (archives int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.archives, s.bytes
}

// Blobs calls fn for every committed blob.
func (s *Store) Blobs(fn func(BlobInfo) error) error {
	err := s.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("b/")})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			var rec blobRecord
			if err := it.Item().Value(func(val []byte) error { return json.Unmarshal(val, &rec) }); err != nil {
				return err
			}
			if err := fn(rec.BlobInfo); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, errNoDB) {
		return nil
	}
	return err
}

func (s *Store) recount() error {
	var n int
	var total int64
	err := s.Blobs(func(b BlobInfo) error {
		n++
		total += b.Size
		s.lru.add(b.SHA256, b.Created)
		return nil
	})
	if err != nil {
		return fmt.Errorf("cache: counting archives: %w", err)
	}
	s.mu.Lock()
	s.archives, s.bytes = n, total
	s.mu.Unlock()
	return nil
}

// CleanOrphans removes chunks that belong to no committed blob and to no
// writer of this process: what a crash or failed write left behind. It is
// safe while writers run: chunks are listed first, then the writers under
// way, then the commit records; a writer whose chunk was listed was
// registered before it wrote it, so it is either still under way, or
// committed (its record is written before it stops being under way), or
// abandoned.
func (s *Store) CleanOrphans() (int, error) {
	stages := make(map[string]int)
	err := s.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("c/"), PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			stage, _, _ := strings.Cut(strings.TrimPrefix(string(it.Item().Key()), "c/"), "/")
			stages[stage]++
		}
		return nil
	})
	if err != nil || len(stages) == 0 {
		return 0, ignoreNoDB(err)
	}
	s.mu.Lock()
	for stage := range s.active {
		delete(stages, stage)
	}
	s.mu.Unlock()
	err = s.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("b/")})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			var rec blobRecord
			if err := it.Item().Value(func(val []byte) error { return json.Unmarshal(val, &rec) }); err != nil {
				return err
			}
			delete(stages, rec.Stage)
		}
		return nil
	})
	if err != nil || len(stages) == 0 {
		return 0, ignoreNoDB(err)
	}
	var orphans [][]byte
	err = s.view(func(txn *badger.Txn) error {
		for stage := range stages {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("c/" + stage + "/"), PrefetchValues: false})
			for it.Rewind(); it.Valid(); it.Next() {
				orphans = append(orphans, it.Item().KeyCopy(nil))
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		return 0, ignoreNoDB(err)
	}
	if err := s.deleteKeys(orphans); err != nil {
		return 0, err
	}
	return len(orphans), nil
}

func ignoreNoDB(err error) error {
	if errors.Is(err, errNoDB) {
		return nil
	}
	return err
}

// ChunkCount returns how many archive chunks the database holds, committed
// or not. It is for diagnostics and tests: after CleanOrphans, every chunk
// belongs to a committed archive or to a write under way.
func (s *Store) ChunkCount() (int, error) {
	n := 0
	err := s.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("c/"), PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	return n, err
}

// PingInterval is how long Ping's answer holds: within it, Ping answers
// from its last probe, or from any write that succeeded since, and never
// writes itself.
const PingInterval = 10 * time.Second

// pingState is Ping's memo: one probe at a time, answers shared.
type pingState struct {
	mu  sync.Mutex
	at  time.Time // of the last answer; zero: none yet
	err error
}

// Ping checks that the database is open and writable, as cheaply as it
// can: probes may come from every load balancer node, as often as they
// like, at once. A store that says without a write that it does not write
// (closed, below the disk reserve: Writable) answers that at once. Else
// the answer is the last one, for PingInterval; after that, a write that
// succeeded within PingInterval (an archive chunk, a record, a commit)
// says the database writes; only when nothing was written for that long
// does Ping write a small key and read it back. Concurrent calls wait for
// one probe and share its answer.
func (s *Store) Ping() error {
	if err := s.Writable(); err != nil {
		return err
	}
	s.ping.mu.Lock()
	defer s.ping.mu.Unlock()
	now := s.space.now()
	if age := now.Sub(s.ping.at); !s.ping.at.IsZero() && age >= 0 && age < PingInterval {
		return s.ping.err
	}
	if last := s.lastWrite.Load(); last != 0 {
		if age := now.Sub(time.Unix(0, last)); age >= 0 && age < PingInterval {
			s.ping.at, s.ping.err = now, nil
			return nil
		}
	}
	s.ping.err = s.probe(now)
	s.ping.at = now
	return s.ping.err
}

// probe writes a small key and reads it back. Caller holds s.ping.mu, so
// that no other probe changes the key in between.
func (s *Store) probe(now time.Time) error {
	if h := s.hooks.pingWrite; h != nil {
		if err := h(); err != nil {
			return fmt.Errorf("cache: not writable: %w", err)
		}
	}
	key := []byte("p/ping")
	val := []byte(now.UTC().Format(time.RFC3339Nano))
	if err := s.update(entryCost(len(key), len(val)), func(txn *badger.Txn) error { return txn.Set(key, val) }); err != nil {
		if errors.Is(err, ErrNotWritable) || errors.Is(err, ErrClosed) {
			return err
		}
		return fmt.Errorf("cache: not writable: %w", err)
	}
	return s.view(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if err != nil {
			return fmt.Errorf("cache: not readable: %w", err)
		}
		return item.Value(func(got []byte) error {
			if !bytes.Equal(got, val) {
				return errors.New("cache: read back a different value")
			}
			return nil
		})
	})
}

// RunGC runs Badger's value-log garbage collection every interval, and
// soon after start-up removed interrupted writes or archives were evicted,
// until ctx is done, so that space of deleted archives returns to the
// disk. A round rewrites the live part of a value-log file before deleting
// it, up to valueLogFileSize: it runs only when that much is free above the
// reserve, and never on a read-only cache.
func (s *Store) RunGC(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.gcKick:
		}
		for ctx.Err() == nil && s.gcRound() == nil {
		}
	}
}

// gcRound rewrites (and deletes) at most one value-log file.
func (s *Store) gcRound() error {
	return s.withWritable(func(db *badger.DB) error {
		if !s.space.spare(valueLogFileSize) {
			return ErrNotWritable
		}
		return db.RunValueLogGC(0.5)
	})
}

func newStageID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

// badgerLogger routes Badger's log to slog: warnings and errors only.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any) {
	b.l.Error(strings.TrimSpace(fmt.Sprintf(f, a...)), "component", "badger")
}

func (b badgerLogger) Warningf(f string, a ...any) {
	b.l.Warn(strings.TrimSpace(fmt.Sprintf(f, a...)), "component", "badger")
}

func (b badgerLogger) Infof(string, ...any)  {}
func (b badgerLogger) Debugf(string, ...any) {}

// quiet shortens an error to its first line: some Badger errors carry a
// hex dump of the value, which has no place in a log.
func quiet(err error) error {
	if err == nil {
		return nil
	}
	return quietError{err}
}

type quietError struct{ err error }

func (e quietError) Error() string {
	msg, _, _ := strings.Cut(e.err.Error(), "\n")
	return msg
}

func (e quietError) Unwrap() error { return e.err }
