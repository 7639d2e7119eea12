// The archive store: committed archives' records, and stat, open,
// delete, list and count.

package cache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/sync/singleflight"

	"github.com/tfmirror/tfmirror/v2/internal/sha256hex"
)

// Blobs is the archive store of a Store: archives ("blobs"),
// content-addressed by the lowercase hex sha256 of their bytes and
// stored in chunks of at most Options.ChunkSize bytes, so that no value
// is large and memory stays flat whatever the archive's size. It is not
// for metadata (Records).
//
// A BlobWriter stages chunks under a fresh random stage id as they
// arrive. Only Commit makes an archive visible: it checks the digest,
// writes the last chunk, syncs, and then writes the commit record, last.
// A crash at any point therefore leaves either a complete archive or
// unreferenced chunks, which are removed soon after Open (orphans.go);
// OpenBlob never returns a partial archive. Any number of writers of one
// sha256 may commit concurrently: one record is kept. Every chunk read is
// checked against the checksum its writer recorded (chunksums.go): a
// byte changed where it is stored is ErrDamaged, never returned.
//
// With Options.MaxBytes set, the least recently used archives are
// evicted once the archives are over the limit (evict.go), and the data
// directory is kept within a disk budget (budget.go).
type Blobs struct {
	db         *database
	writers    *writerGate
	chunkSize  int
	bufs       *chunkBufs
	log        *slog.Logger
	failWrites func() error // Options.FailWrites: called before each chunk is written
	onDamaged  func()       // Options.OnDamaged

	stats *statMemo // StatBlob answers

	// damaged are the stages of archives found damaged where they are
	// stored, logged once each (damage); damagedBlobs the archives
	// (sha256 to stage) a reader of this process found so. They, and
	// those whose commit record carries the mark (blobRecord.Damaged,
	// read back after a restart), are not found (StatBlob, OpenBlob)
	// until a writer commits them anew (Commit replaces them).
	damaged, damagedBlobs sync.Map

	// summing are the reads of whole archives whose records have no
	// chunk checksums, by stage (withSums).
	summing singleflight.Group

	// blobLocks serialise, per sha256, the read-then-write of a blob's
	// commit record together with the counters and LRU entry that follow
	// it (Commit, deleteBlob): see lockBlob.
	blobLocks [256]sync.Mutex

	// mu guards the counters of the committed archives (marked: those
	// whose record carries the damaged mark) and the state of their count
	// (count.go).
	mu       sync.Mutex
	archives int
	bytes    int64
	marked   int
	count    counting

	// staging is the size of the chunks that writers not yet committed
	// nor closed have stored: the size limit counts them too.
	staging atomic.Int64
	budget  diskBudget // of the data directory, with a size limit
	evict   *evictor   // access order, references and eviction

	hooks *testHooks
}

func newBlobs(opts Options, db *database, writers *writerGate, hooks *testHooks) *Blobs {
	s := &Blobs{db: db, writers: writers, chunkSize: opts.ChunkSize, log: opts.Logger,
		failWrites: opts.FailWrites, onDamaged: opts.OnDamaged, stats: newStatMemo(), hooks: hooks,
		bufs: newChunkBufs(opts.ChunkSize)}
	s.evict = &evictor{blobs: s, kicks: make(chan struct{}, 1), flush: make(chan chan struct{})}
	s.evict.lru.init(opts.MaxBytes, opts.OnEvict, opts.Evictable)
	if opts.MaxBytes > 0 && !opts.InMemory {
		reserve := db.space.Reserve
		if reserve < 0 {
			reserve = DefaultDiskReserve
		}
		s.budget = diskBudget{dir: opts.Dir, wait: budgetWait, gcRoom: db.bopts.ValueLogFileSize, limit: func() int64 {
			base := opts.MaxBytes
			if s.evict.lru.unmet.Load() {
				// Over the limit with nothing left that may be evicted:
				// the budget follows what is kept, and what is being
				// written (an import of what cannot be fetched again).
				base = max(base, s.occupied())
			}
			return base + base/4 + reserve
		}}
	}
	return s
}

// chunkBufs are the buffers of chunks being read or written, pooled.
type chunkBufs struct {
	pool sync.Pool
	size int // the store's chunk size
}

func newChunkBufs(size int) *chunkBufs {
	c := &chunkBufs{size: size}
	c.pool.New = func() any { b := make([]byte, 0, size); return &b }
	return c
}

// get is an empty buffer of capacity size.
func (c *chunkBufs) get() *[]byte {
	b := c.pool.Get().(*[]byte)
	if cap(*b) != c.size {
		nb := make([]byte, 0, c.size)
		b = &nb
	}
	*b = (*b)[:0]
	return b
}

// put returns b to the pool, if its capacity is size: one a reader grew
// for an archive stored with a larger chunk size (blob.load) is dropped,
// as the next writer would fill it past the chunk size.
func (c *chunkBufs) put(b *[]byte) {
	if cap(*b) != c.size {
		return
	}
	*b = (*b)[:0]
	c.pool.Put(b)
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
func (s *Blobs) lockBlob(sha string) (unlock func()) {
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
	// Sums are the checksums of its chunks (chunkSum, 8 bytes a chunk,
	// big-endian), against which every read checks a chunk (readChunk).
	// A record written by a release before them has none (withSums).
	Sums []byte `json:"sums,omitempty"`
	// Damaged says a read found the archive's stored bytes damaged
	// (ErrDamaged): the mark outlives the process (markDamaged), so
	// that the copy is never offered again, and goes with the record
	// when a verified copy replaces it (Commit) or it is deleted.
	Damaged bool `json:"damaged,omitempty"`
}

func checkSHA(sha string) error {
	if !sha256hex.Valid(sha) {
		return fmt.Errorf("cache: %q is not a sha256 in lowercase hex", sha)
	}
	return nil
}

func blobKey(sha string) []byte { return []byte("b/" + sha) }

func chunkKey(stage string, idx int) []byte { return fmt.Appendf(nil, "c/%s/%08x", stage, idx) }

// writeRecord writes rec as its archive's commit record.
func writeRecord(txn *badger.Txn, rec blobRecord) error {
	doc, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return txn.Set(blobKey(rec.SHA256), doc)
}

func readRecord(txn *badger.Txn, sha string) (blobRecord, error) {
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

// StatBlob returns the committed blob's info, or ErrNotFound. An archive
// being evicted is not found: it is about to go, and a caller told it is
// there would not store it again (OpenBlob does not open it either).
func (s *Blobs) StatBlob(sha string) (BlobInfo, error) {
	info, marked, err := s.statBlob(sha)
	if err == nil && s.evict.lru.evictingNow(sha) != nil {
		return BlobInfo{}, fmt.Errorf("%w: archive %s (being evicted)", ErrNotFound, sha)
	}
	if err == nil && (marked || s.isDamaged(sha)) {
		return BlobInfo{}, fmt.Errorf("%w: %w: archive %s", ErrNotFound, ErrDamaged, sha)
	}
	return info, err
}

// statBlob is StatBlob, for an archive being evicted or found damaged
// too; marked says its record carries the mark of damage found before
// (blobRecord.Damaged).
func (s *Blobs) statBlob(sha string) (BlobInfo, bool, error) {
	if err := checkSHA(sha); err != nil {
		return BlobInfo{}, false, err
	}
	if s.db.isClosed() {
		return BlobInfo{}, false, ErrClosed
	}
	e, gen, ok := s.stats.Get(sha)
	if ok {
		if !e.found {
			return BlobInfo{}, false, fmt.Errorf("%w: archive %s", ErrNotFound, sha)
		}
		return e.info, e.damaged, nil
	}
	var rec blobRecord
	err := s.db.view(func(txn *badger.Txn) (err error) {
		rec, err = readRecord(txn, sha)
		return err
	})
	switch {
	case errors.Is(err, errNoDB):
		// Not remembered: the database may open.
	case err == nil:
		s.stats.Put(sha, gen, statEntry{info: rec.BlobInfo, found: true, damaged: rec.Damaged})
	case errors.Is(err, ErrNotFound):
		s.stats.Put(sha, gen, statEntry{})
	}
	return rec.BlobInfo, rec.Damaged, err
}

// StatGeneration changes (grows) whenever an answer of StatBlob may have
// changed since: an archive committed or deleted, the database reopened.
// It takes no lock, so callers that keep what they made from StatBlob's
// answers can check cheaply, on every use, that it still holds.
func (s *Blobs) StatGeneration() uint64 { return s.stats.Generation() }

// OpenBlob opens a committed blob for reading, or returns ErrNotFound.
func (s *Blobs) OpenBlob(sha string) (BlobReader, error) {
	if err := checkSHA(sha); err != nil {
		return nil, err
	}
	// Take the reference before reading the record, so that eviction,
	// which skips referenced blobs, cannot delete it while it is read.
	if !s.evict.lru.acquire(sha) {
		return nil, fmt.Errorf("%w: archive %s", ErrNotFound, sha)
	}
	var rec blobRecord
	err := s.db.view(func(txn *badger.Txn) (err error) {
		rec, err = readRecord(txn, sha)
		return err
	})
	// Found damaged before (the record's mark, which outlives the
	// process) or by a reader of this process.
	if err == nil && (rec.Damaged || s.isDamaged(sha)) {
		err = fmt.Errorf("%w: %w: archive %s", ErrNotFound, ErrDamaged, sha)
	}
	b := &blob{s: s, rec: rec}
	if err == nil {
		err = b.withSums()
	}
	if err != nil {
		s.evict.lru.release(sha)
		return nil, err
	}
	return b, nil
}

// deleteBlob removes a committed blob: its record first, so it is never
// visible half-deleted, then its chunks, whatever holds it: eviction
// claims it first (evict.go). Once the record is deleted, so is the
// archive, and deleteBlob succeeds: chunks it could not delete then (a
// full disk) are logged and left to the removal of an interrupted
// write's, which nothing names either (orphans.go). With held (the
// eviction's, lru.held), it deletes nothing when held, asked under the
// blob's lock, says the archive is in use (ErrInUse): a claim refuses new
// readers (acquire), but a writer that found no record, or found one
// before the claim, commits and holds the archive until it is closed
// (addPinned), under that lock.
func (s *Blobs) deleteBlob(sha string, held func(sha string) bool) error {
	if err := checkSHA(sha); err != nil {
		return err
	}
	var rec blobRecord
	unlock := s.lockBlob(sha)
	if held != nil && held(sha) {
		unlock()
		return fmt.Errorf("%w: %s (committed by a writer not yet closed)", ErrInUse, sha)
	}
	err := s.db.update(entryCost(len(blobKey(sha)), 0), func(txn *badger.Txn) (err error) {
		if rec, err = readRecord(txn, sha); err != nil {
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
		if rec.Damaged {
			s.marked--
		}
		s.mu.Unlock()
		s.evict.lru.forget(sha)
		s.damagedBlobs.Delete(sha)
	}
	unlock()
	if err != nil {
		return err
	}
	if err := s.deleteChunks(rec.Stage, rec.Chunks); err != nil {
		// The archive is deleted with its record: its chunks, which no
		// record names now, are removed as an interrupted write's are,
		// once the cache writes again after a full disk (checkSpace), or
		// at the next Open.
		level := min(WriteFailureLevel(err), slog.LevelWarn)
		if errors.Is(err, ErrClosed) {
			level = slog.LevelDebug // the store is closing
		}
		s.log.Log(context.Background(), level, "the chunks of a deleted archive are left on disk: they are removed once the cache writes again, or at the next start",
			"sha256", sha, "error", err)
	}
	return nil
}

func (s *Blobs) deleteChunks(stage string, n int) error {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = chunkKey(stage, i)
	}
	return s.db.deleteKeys(keys)
}

// readChunk copies chunk idx of stage, the archive sha's (for the log),
// from byte off on, into p, once the whole chunk was found to have the
// checksum want (its writer's, chunkSum): a chunk that has not is an
// archive damaged where it is stored, ErrDamaged, logged once. The
// chunk is hashed in the pass that copies it (copyChecked); Badger does
// not check its own checksum of the values it reads (badgerOptions).
func (s *Blobs) readChunk(sha, stage string, idx int, off int, p []byte, want uint64) (int, error) {
	var n int
	err := s.db.chunkValue(stage, idx, func(val []byte) error {
		if off > len(val) {
			return fmt.Errorf("chunk %d is %d bytes, read at %d", idx, len(val), off)
		}
		var ok bool
		if n, ok = copyChecked(p, val, off, want); !ok {
			n = 0
			return s.damage(sha, stage, idx, "its bytes do not have the checksum written with them")
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("cache: reading chunk %d of %s: %w", idx, stage, err)
	}
	return n, nil
}

// chunkValue calls fn with the stored bytes of chunk idx of stage, valid
// only while fn runs; badger.ErrKeyNotFound when there is no such chunk.
func (d *database) chunkValue(stage string, idx int, fn func(val []byte) error) error {
	return d.view(func(txn *badger.Txn) error {
		item, err := txn.Get(chunkKey(stage, idx))
		if err != nil {
			return err
		}
		return item.Value(fn)
	})
}

// ErrDamaged is returned by reads of an archive whose stored bytes no
// longer match the checksums recorded with them, or whose chunks are
// not the length its record says (a failing disk): its bytes are never
// returned as the archive's.
var ErrDamaged = errors.New("archive damaged where it is stored")

// isDamaged says whether a reader found the committed archive sha
// damaged where it is stored.
func (s *Blobs) isDamaged(sha string) bool {
	_, ok := s.damagedBlobs.Load(sha)
	return ok
}

// markDamaged records that the archive sha, stored under stage, was
// found damaged: it is not found from now on, and the next writer of it
// replaces it (Commit). The mark is written into the archive's commit
// record, through the store's writes as every record is, so that it
// holds after a restart (StatBlob and OpenBlob read it from the record)
// without a read finding the damage again; when the store cannot write
// (a full disk), it holds in memory until the process ends, and is
// logged so.
func (s *Blobs) markDamaged(sha, stage string) {
	if prev, ok := s.damagedBlobs.Swap(sha, stage); ok && prev == stage {
		return // marked already (another reader found it too)
	}
	s.stats.Forget(sha)
	unlock := s.lockBlob(sha)
	defer unlock()
	var gone, wrote bool
	err := s.db.update(entryCost(len(blobKey(sha)), 512), func(txn *badger.Txn) error {
		rec, err := readRecord(txn, sha)
		if gone = errors.Is(err, ErrNotFound) || err == nil && rec.Stage != stage; gone || err != nil || rec.Damaged {
			// Deleted or replaced since it was read, or marked already.
			return err
		}
		rec.Damaged = true
		wrote = true
		return writeRecord(txn, rec)
	})
	if err == nil && wrote {
		s.mu.Lock()
		s.marked++
		s.mu.Unlock()
	}
	if gone {
		// The copy found damaged is no longer the archive's: the mark
		// must not refuse the one that replaced it.
		s.damagedBlobs.CompareAndDelete(sha, stage)
	}
	s.stats.Forget(sha)
	switch {
	case gone:
	case err != nil:
		s.log.Warn("the mark of a cached archive found damaged could not be stored: it is refused until the process ends, and a read after a restart finds the damage again",
			"sha256", sha, "error", err)
	}
}

// damage returns ErrDamaged for chunk idx of stage, the archive sha's
// (the archive whole when idx is negative), logging it once for the
// stage (every reader of the archive finds it).
func (s *Blobs) damage(sha, stage string, idx int, detail string) error {
	where := "the archive"
	if idx >= 0 {
		where = fmt.Sprintf("chunk %d", idx)
	}
	if _, logged := s.damaged.LoadOrStore(stage, true); !logged {
		s.log.Error("a cached archive is damaged where it is stored; it is not served, and is fetched again when it can be: check the disk, then run tfmirror cache verify and prune or re-import what it finds",
			"sha256", sha, "stage", stage, "where", where, "detail", detail)
		if s.onDamaged != nil {
			s.onDamaged()
		}
	}
	return fmt.Errorf("%w: %s: %s", ErrDamaged, where, detail)
}

// DamagedArchives returns the number of committed archives whose record
// carries the mark of a read that found them damaged where they are
// stored (ErrDamaged): kept, not found, until a verified copy replaces
// them or they are deleted. Marks a full disk kept from the records are
// not counted. Right after Open, it waits for the count, as Stats does.
func (s *Blobs) DamagedArchives() int {
	s.counted()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.marked
}

// Stats returns the number of committed archives and their total size.
// Right after Open, while the archives are counted, it waits for the
// count.
func (s *Blobs) Stats() (archives int, bytes int64) {
	s.counted()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.archives, s.bytes
}

// ScanBlobs calls fn with the sha256 and size of every committed
// archive, in sha256 order, until fn returns an error (which ScanBlobs
// returns). It reads the records in order rather than one lookup each,
// which is what a pass over many archives wants. Like ScanMeta, it reads
// in batches, each in a transaction of its own, and calls fn outside
// them: an archive committed or deleted during the scan may or may not
// be seen.
func (s *Blobs) ScanBlobs(fn func(sha string, size int64) error) error {
	type sized struct {
		sha  string
		size int64
	}
	p := []byte("b/")
	return scanBatched(s.db, p, p, scanBatch, func(key, val []byte) (sized, error) {
		var rec struct { // the part of a commit record read here
			Size int64 `json:"size"`
		}
		err := json.Unmarshal(val, &rec)
		return sized{sha: string(key[len(p):]), size: rec.Size}, err
	}, func(b sized) error { return fn(b.sha, b.size) })
}
