package cache

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// ErrDigestMismatch is returned by Commit when the bytes written do not
// have the expected sha256.
var ErrDigestMismatch = errors.New("archive digest mismatch")

// blob is the BlobReader of Blobs.
type blob struct {
	s   *Blobs
	rec blobRecord
	pos int64

	mu     sync.Mutex
	held   heldChunk // the chunk last read, so sequential small reads cost one lookup a chunk
	closed bool
}

// Info describes the blob.
func (b *blob) Info() BlobInfo { return b.rec.BlobInfo }

// Size is the blob's length in bytes.
func (b *blob) Size() int64 { return b.rec.Size }

// ReadAt implements io.ReaderAt. Once the store is closed it fails with
// ErrClosed, the chunk it holds in memory notwithstanding; a ReadAt under
// way as the store closes copies the rest of that chunk, and fails at
// the next. After Close it fails.
func (b *blob) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("cache: negative offset")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, fmt.Errorf("cache: archive %s: reader is closed", b.rec.SHA256)
	}
	if b.s.db.isClosed() {
		return 0, ErrClosed
	}
	n := 0
	for n < len(p) && off < b.rec.Size {
		idx := int(off / int64(b.rec.ChunkSize))
		if err := b.load(idx); err != nil {
			return n, err
		}
		chunk := b.held.bytes()
		c := copy(p[n:], chunk[off-int64(idx)*int64(b.rec.ChunkSize):])
		n += c
		off += int64(c)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// load makes chunk idx the held one.
func (b *blob) load(idx int) error {
	if b.held.holds(idx) {
		return nil
	}
	want := min(int64(b.rec.ChunkSize), b.rec.Size-int64(idx)*int64(b.rec.ChunkSize))
	sum, ok := sumOf(b.rec.Sums, idx)
	if !ok {
		return fmt.Errorf("cache: archive %s: chunk %d of %d", b.rec.SHA256, idx, b.rec.Chunks)
	}
	chunk, err := b.held.read(b.s, b.rec.SHA256, b.rec.Stage, idx, int(want), sum)
	if errors.Is(err, badger.ErrKeyNotFound) {
		err = b.missingChunk(idx, err)
	}
	if err == nil && int64(len(chunk)) != want {
		b.held.forget()
		err = fmt.Errorf("cache: archive %s: %w", b.rec.SHA256,
			b.s.damage(b.rec.SHA256, b.rec.Stage, idx, fmt.Sprintf("%d bytes stored, %d in its record", len(chunk), want)))
	}
	if errors.Is(err, ErrDamaged) {
		b.s.markDamaged(b.rec.SHA256, b.rec.Stage)
	}
	return err
}

// heldChunk is the stored chunk a reader read last, read whole into a
// pooled buffer and checked against its checksum once, so that small
// sequential reads read and check each chunk once (a blob's, a
// follower's). Its owner serialises its use.
type heldChunk struct {
	buf *[]byte
	idx int  // the chunk's index, when ok
	ok  bool // a chunk is held (the zero value holds none)
}

// read makes chunk idx of stage, the archive sha's (for the log), the
// held one, unless it is, reading at most size bytes of it and checking
// it whole against sum, and returns its bytes.
func (h *heldChunk) read(s *Blobs, sha, stage string, idx, size int, sum uint64) ([]byte, error) {
	if h.holds(idx) {
		return *h.buf, nil
	}
	h.forget()
	if h.buf == nil {
		h.buf = s.bufs.get()
	}
	if cap(*h.buf) < size { // stored with a larger chunk size than now configured
		*h.buf = make([]byte, 0, size)
	}
	buf := (*h.buf)[:size]
	n, err := s.readChunk(sha, stage, idx, 0, buf, sum)
	if err != nil {
		return nil, err
	}
	*h.buf, h.idx, h.ok = buf[:n], idx, true
	return *h.buf, nil
}

// holds says whether chunk idx is the held one.
func (h *heldChunk) holds(idx int) bool { return h.ok && h.idx == idx }

// bytes is the held chunk.
func (h *heldChunk) bytes() []byte { return *h.buf }

// forget holds no chunk any more, keeping the buffer.
func (h *heldChunk) forget() { h.ok = false }

// release returns the buffer to the pool.
func (h *heldChunk) release(s *Blobs) {
	if h.buf != nil {
		s.bufs.put(h.buf)
		h.buf = nil
	}
	h.forget()
}

// missingChunk is the error of a read that found no chunk idx (err):
// ErrDamaged while the archive's commit record still names the blob's
// stage (a chunk lost where it is stored, as from a value log cut short),
// so that it is marked and replaced by the next verified copy; err itself
// when the archive was deleted or replaced since it was opened (the
// record goes before the chunks), which is no damage.
func (b *blob) missingChunk(idx int, err error) error {
	var live bool
	b.s.db.view(func(txn *badger.Txn) error {
		rec, rerr := readRecord(txn, b.rec.SHA256)
		live = rerr == nil && rec.Stage == b.rec.Stage
		return nil
	})
	if !live {
		return err
	}
	return fmt.Errorf("cache: archive %s: %w", b.rec.SHA256, b.s.damage(b.rec.SHA256, b.rec.Stage, idx, "the chunk is missing"))
}

// Read implements io.Reader.
func (b *blob) Read(p []byte) (int, error) {
	if b.pos >= b.rec.Size {
		return 0, io.EOF
	}
	n, err := b.ReadAt(p, b.pos)
	b.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// Seek implements io.Seeker.
func (b *blob) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += b.pos
	case io.SeekEnd:
		offset += b.rec.Size
	default:
		return 0, errors.New("cache: invalid whence")
	}
	if offset < 0 {
		return 0, errors.New("cache: negative position")
	}
	b.pos = offset
	return offset, nil
}

// Close releases the blob's buffer and its protection from eviction.
func (b *blob) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.held.release(b.s)
	b.mu.Unlock()
	b.s.evict.lru.release(b.rec.SHA256)
	b.s.evict.kick() // it may have been the only thing in the way
	return nil
}

// blobWriter is the BlobWriter of Blobs.
type blobWriter struct {
	s        *Blobs
	expected string
	stage    string
	hash     hash.Hash // used by the writing goroutine only

	mu          sync.Mutex
	cur         *[]byte        // the chunk being filled
	last        *[]byte        // the chunk stored last, kept for the readers close behind; nil if none
	lastIdx     int            // its index (-1: none)
	staged      int            // chunks finished (in Badger, or in mem)
	sums        []byte         // the checksums of the chunks finished (blobRecord.Sums)
	mem         map[int][]byte // finished chunks that could not be staged
	memBytes    int64          // their size, reserved from the writers' unstaged budget
	dropped     map[int]bool   // finished chunks neither staged nor kept (ErrChunkDropped)
	spare       int            // the chunk in mem kept over the budget (-1: none)
	written     int64
	stagedBytes int64 // of the chunks stored, counted in Blobs.staging until committed or deleted
	err         error // first staging failure
	state       writerState
	dropOnClose bool
	pinned      bool // committed (its copy or another writer's): the archive is protected from eviction until Close
}

type writerState int

const (
	writing writerState = iota
	committed
	uncommittable // Commit failed after the bytes were complete: still readable until Close
	aborted
	closed
)

// NewBlobWriter starts staging an archive expected to have sha256
// expectedSHA. It fails with ErrClosed once Shutdown or Close began.
func (s *Blobs) NewBlobWriter(expectedSHA string) (BlobWriter, error) {
	if err := checkSHA(expectedSHA); err != nil {
		return nil, err
	}
	w := &blobWriter{s: s, expected: expectedSHA, stage: newStageID(), hash: sha256.New(), spare: -1, lastIdx: -1}
	if err := s.writers.register(w.stage); err != nil {
		return nil, err
	}
	w.cur = s.bufs.get()
	return w, nil
}

// Write appends p. A failure to store a chunk does not fail Write: the
// chunk is kept in memory so that readers still get every byte, and Err
// reports the failure; Commit will then refuse to commit.
func (w *blobWriter) Write(p []byte) (int, error) {
	w.hash.Write(p)
	total := len(p)
	for len(p) > 0 {
		w.mu.Lock()
		if w.state != writing {
			w.mu.Unlock()
			return total - len(p), errors.New("cache: write after commit, abort or close")
		}
		// Chunks of chunkSize, which ReadAt and the commit record count
		// in, whatever the buffer's capacity.
		cur := *w.cur
		n := copy(cur[len(cur):w.s.chunkSize], p)
		*w.cur = cur[:len(cur)+n]
		w.written += int64(n)
		full := len(*w.cur) == w.s.chunkSize
		w.mu.Unlock()
		p = p[n:]
		if full {
			w.finishChunk()
		}
	}
	return total, nil
}

// finishChunk stages the full current chunk and starts a new one.
func (w *blobWriter) finishChunk() {
	// Readers copy the current chunk under w.mu, and it is replaced only
	// under w.mu after it is staged, so it can be read outside the lock.
	idx := w.staged
	data := *w.cur
	sum := chunkSum(data)
	err := w.stageChunk(idx, data)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sums = appendSum(w.sums, sum)
	if err != nil {
		if w.err == nil {
			w.err = fmt.Errorf("cache: staging chunk %d: %w", idx, err)
		}
		if w.mem == nil {
			w.mem = make(map[int][]byte)
		}
		if w.s.writers.reserveUnstaged(int64(len(data))) {
			w.memBytes += int64(len(data))
		} else {
			// Over the budget, the newest chunk is still kept (the final
			// bytes, which clients are held back on until the checksum
			// matched, may be in it), in place of the one kept this way
			// before, which is dropped: one chunk per writer at most.
			if w.spare >= 0 {
				if w.dropped == nil {
					w.dropped = make(map[int]bool)
					w.s.log.Warn("cache not writable and unstaged-memory limit reached: clients behind in this download will fail",
						"sha256", w.expected, "limit_bytes", w.s.writers.maxUnstaged)
				}
				w.dropped[w.spare] = true
				delete(w.mem, w.spare) // readers copy under w.mu: no one holds it
			}
			w.spare = idx
		}
		w.mem[idx] = data // keep it; its buffer is not reused
		w.cur = w.s.bufs.get()
	} else {
		// The chunk's bytes stay in memory until the next one is stored,
		// for the readers close behind the download (most of its
		// clients, and all of those held back on its last bytes): they
		// read them there, as they read the chunk being filled, rather
		// than each reading and checking the stored chunk through a
		// buffer of its own.
		w.cur, w.last, w.lastIdx = w.last, w.cur, idx
		if w.cur == nil {
			w.cur = w.s.bufs.get()
		}
		*w.cur = (*w.cur)[:0]
		w.stagedBytes += int64(len(data)) // counted in Blobs.staging by stageChunk
	}
	w.staged++
}

func (w *blobWriter) stageChunk(idx int, data []byte) error {
	if h := w.s.failWrites; h != nil {
		if err := h(); err != nil {
			return err
		}
	}
	if w.err != nil {
		// Once staging failed the blob cannot be committed; stop writing.
		return w.err
	}
	// A store that does not write (opened read-only below its reserve,
	// the disk full since) refuses at once: the disk budget's wait would
	// hold the download for nothing, no eviction or GC round running
	// meanwhile, the directory measured over its budget (a reopened
	// one is, at its first write, with more kept than the limit).
	if err := w.s.db.writable(); err != nil {
		return err
	}
	key := chunkKey(w.stage, idx)
	// The size limit counts the chunk from now on, so that eviction makes
	// room for it in the disk budget.
	n := int64(len(data))
	w.s.staging.Add(n)
	w.s.evict.kick()
	cost := entryCost(len(key), len(data))
	if err := w.s.budget.admit(cost, w.s.evict.pressForRoom, w.s.writers.refusing); err != nil {
		w.s.staging.Add(-n)
		return err
	}
	defer w.s.budget.done(cost)
	if err := w.s.db.update(cost, func(txn *badger.Txn) error { return txn.Set(key, data) }); err != nil {
		w.s.staging.Add(-n)
		return quiet(err)
	}
	return nil
}

// Written is how many bytes have been written.
func (w *blobWriter) Written() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.written
}

// Err reports the first failure to store a chunk, if any.
func (w *blobWriter) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Sum is the hex sha256 of everything written so far. Writer goroutine only.
func (w *blobWriter) Sum() string { return hex.EncodeToString(w.hash.Sum(nil)) }

// readAt reads bytes already written, for off+len(p) <= Written(): the
// chunks in memory from there, and those stored through stored (chunk idx
// from inChunk into p, to be checked against the checksum sum recorded
// for it). It is safe to call from any goroutine.
func (w *blobWriter) readAt(p []byte, off int64, stored func(idx, inChunk int, p []byte, sum uint64) (int, error)) (int, error) {
	cs := int64(w.s.chunkSize)
	n := 0
	for n < len(p) {
		w.mu.Lock()
		if w.state == aborted || w.state == closed {
			w.mu.Unlock()
			return n, errors.New("cache: blob writer is closed")
		}
		if off >= w.written {
			w.mu.Unlock()
			return n, io.EOF
		}
		idx := int(off / cs)
		inChunk := int(off % cs)
		var c int
		switch {
		case idx == w.staged:
			c = copy(p[n:], (*w.cur)[inChunk:])
			w.mu.Unlock()
		case idx == w.lastIdx:
			c = copy(p[n:], (*w.last)[inChunk:])
			w.mu.Unlock()
		case w.mem[idx] != nil:
			c = copy(p[n:], w.mem[idx][inChunk:])
			w.mu.Unlock()
		case w.dropped[idx]:
			w.mu.Unlock()
			return n, fmt.Errorf("%w (chunk %d)", ErrChunkDropped, idx)
		default:
			sum, _ := sumOf(w.sums, idx) // idx < w.staged
			w.mu.Unlock()
			var err error
			if c, err = stored(idx, inChunk, p[n:], sum); err != nil {
				return n, err
			}
		}
		n += c
		off += int64(c)
	}
	return n, nil
}

// Follow returns a reader of the bytes written that keeps the stored
// chunk it read last, checked, as a BlobReader does.
func (w *blobWriter) Follow() Follower { return &follower{w: w} }

// follower is the Follower of a blobWriter.
type follower struct {
	w *blobWriter

	mu     sync.Mutex
	held   heldChunk // the stored chunk last read, checked whole
	closed bool
}

// ReadAt reads bytes already written, for off+len(p) <= Written().
func (f *follower) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, errors.New("cache: follower is closed")
	}
	return f.w.readAt(p, off, f.stored)
}

// stored reads chunk idx from inChunk into p through f's buffer: the
// chunk is read and checked whole once, however many reads it takes to
// copy it out.
func (f *follower) stored(idx, inChunk int, p []byte, sum uint64) (int, error) {
	chunk, err := f.held.read(f.w.s, f.w.expected, f.w.stage, idx, f.w.s.chunkSize, sum)
	if err != nil {
		return 0, err
	}
	if inChunk >= len(chunk) {
		return 0, fmt.Errorf("cache: chunk %d of %s is %d bytes, read at %d", idx, f.w.stage, len(chunk), inChunk)
	}
	return copy(p, chunk[inChunk:]), nil
}

// Close releases the follower's buffer.
func (f *follower) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.closed = true
		f.held.release(f.w.s)
	}
	return nil
}

// Commit makes the blob visible under its sha256, with h1 recorded. It
// fails if the digest differs from the expected one (ErrDigestMismatch:
// the writer is aborted) or the blob could not be stored (a chunk, the
// sync or the commit record failed: readers still get every byte until
// Close, which removes what was staged). ReadAt keeps working until Close.
//
// Any number of writers may commit the same sha256 concurrently: one
// record is written, and every other writer's Commit succeeds too,
// returning that record's BlobInfo (its Created is the first writer's);
// the other writers' staged copies are deleted when they are closed.
// Every writer that committed holds the archive, as a reader does, until
// it is closed: no eviction deletes it meanwhile.
func (w *blobWriter) Commit(h1 string) (BlobInfo, error) {
	w.mu.Lock()
	if w.state != writing {
		w.mu.Unlock()
		return BlobInfo{}, errors.New("cache: commit of a finished blob writer")
	}
	w.mu.Unlock()

	if sum := w.Sum(); sum != w.expected {
		w.Abort()
		return BlobInfo{}, fmt.Errorf("%w: got %s, want %s", ErrDigestMismatch, sum, w.expected)
	}
	if len(*w.cur) > 0 {
		w.finishChunk()
	}
	if err := w.Err(); err != nil {
		w.giveUp()
		return BlobInfo{}, err
	}
	if err := w.s.db.sync(); err != nil {
		w.giveUp()
		return BlobInfo{}, fmt.Errorf("cache: sync: %w", err)
	}

	w.mu.Lock()
	rec := blobRecord{
		BlobInfo:  BlobInfo{SHA256: w.expected, Size: w.written, H1: h1, Created: time.Now().UTC()},
		ChunkSize: w.s.chunkSize,
		Chunks:    w.staged,
		Stage:     w.stage,
		Sums:      w.sums,
	}
	w.mu.Unlock()
	doc, err := json.Marshal(rec)
	if err != nil {
		w.giveUp()
		return BlobInfo{}, err
	}
	// Under the blob's lock, the record, the counters and the LRU entry
	// change together: of any number of writers of this sha256, exactly
	// one writes the record and counts it; the others find it and drop
	// their copy when they are closed.
	var existing, replaced *blobRecord
	var unlock func()
	for {
		// A record found while its archive is being evicted is about to
		// go: this writer's copy must not be dropped for it. The eviction
		// needs the blob's lock to delete it; wait for it to end and look
		// again.
		var evicting <-chan struct{}
		existing, replaced = nil, nil
		unlock = w.s.lockBlob(w.expected)
		err = w.s.db.update(entryCost(len(blobKey(w.expected)), len(doc)), func(txn *badger.Txn) error {
			old, err := readRecord(txn, w.expected)
			switch {
			case err == nil:
				if evicting = w.s.evict.lru.evictingNow(w.expected); evicting != nil {
					return nil
				}
				if stage, ok := w.s.damagedBlobs.Load(w.expected); !old.Damaged && (!ok || stage != old.Stage) {
					existing = &old
					return nil
				}
				// A reader found the stored copy damaged (in this
				// process, or in one before: its record is marked):
				// this one, verified, takes its place, and its record
				// carries no mark.
				replaced = &old
			case !errors.Is(err, ErrNotFound):
				return err
			}
			if h := w.s.hooks.recordRead; h != nil {
				h(w.expected)
			}
			return txn.Set(blobKey(w.expected), doc)
		})
		if err != nil || evicting == nil {
			break
		}
		unlock()
		<-evicting
	}
	w.s.stats.Forget(w.expected)
	if err == nil && existing == nil {
		// From staged to committed in one step under s.mu, where the size
		// limit reads both (Blobs.occupied): an eviction pass between the
		// two would count the archive twice and evict one too many.
		w.mu.Lock()
		staged := w.stagedBytes
		w.stagedBytes = 0
		w.mu.Unlock()
		w.s.mu.Lock()
		if replaced != nil {
			w.s.bytes -= replaced.Size
			if replaced.Damaged {
				w.s.marked--
			}
		} else {
			w.s.archives++
		}
		w.s.bytes += rec.Size
		w.s.staging.Add(-staged)
		w.s.mu.Unlock()
		w.s.damagedBlobs.Delete(w.expected)
	}
	if err == nil {
		// This writer holds the archive until it is closed, whichever
		// writer's copy the record names: held under the blob's lock,
		// which a deletion takes to ask, so that no eviction takes the
		// archive from under a writer whose Commit said it is stored
		// (and whose Close then drops its own copy).
		w.s.evict.lru.addPinned(rec.SHA256)
	}
	unlock()
	if replaced != nil && err == nil {
		// Readers of the damaged copy fail from now on, as they would at
		// its damaged chunk.
		if err := w.s.deleteChunks(replaced.Stage, replaced.Chunks); err != nil {
			w.s.log.Warn("deleting the damaged copy of an archive replaced", "sha256", w.expected, "error", err)
		}
		w.s.db.kickGC()
	}
	if err != nil {
		w.giveUp()
		return BlobInfo{}, fmt.Errorf("cache: writing commit record: %w", err)
	}
	w.mu.Lock()
	w.state = committed
	w.dropOnClose = existing != nil
	w.pinned = true
	w.mu.Unlock()
	if existing != nil {
		return existing.BlobInfo, nil
	}
	w.s.evict.kick()
	return rec.BlobInfo, nil
}

// giveUp marks a complete, verified writer that could not be committed:
// readers still get every byte until Close, which deletes what was staged.
func (w *blobWriter) giveUp() {
	w.mu.Lock()
	if w.state == writing {
		w.state = uncommittable
	}
	w.mu.Unlock()
}

// Abort discards everything staged. Readers get errors from then on.
func (w *blobWriter) Abort() error {
	w.mu.Lock()
	if w.state != writing {
		w.mu.Unlock()
		return nil
	}
	w.state = aborted
	n := w.staged
	held := w.memBytes
	w.mem, w.dropped, w.memBytes = nil, nil, 0 // readers fail from now on
	w.mu.Unlock()
	w.s.writers.releaseUnstaged(held)
	err := w.s.deleteChunks(w.stage, n)
	w.forget()
	return err
}

// Close releases the writer's memory; an uncommitted writer is aborted.
func (w *blobWriter) Close() error {
	w.mu.Lock()
	state, drop, n, pinned := w.state, w.dropOnClose, w.staged, w.pinned
	w.pinned = false
	w.mu.Unlock()
	var err error
	switch {
	case state == writing:
		err = w.Abort()
	case state == uncommittable, drop:
		err = w.s.deleteChunks(w.stage, n)
	}
	w.mu.Lock()
	w.state = closed
	for _, b := range []**[]byte{&w.cur, &w.last} {
		if *b != nil {
			w.s.bufs.put(*b)
			*b = nil
		}
	}
	w.lastIdx = -1
	w.mem, w.dropped = nil, nil
	held := w.memBytes
	w.memBytes = 0
	w.mu.Unlock()
	w.s.writers.releaseUnstaged(held)
	w.forget()
	if pinned {
		w.s.evict.lru.release(w.expected)
		w.s.evict.kick() // the blob this writer committed is evictable from now on
	}
	return err
}

// unstage stops counting the writer's stored chunks as being staged:
// they were committed, or deleted.
func (w *blobWriter) unstage() {
	w.mu.Lock()
	n := w.stagedBytes
	w.stagedBytes = 0
	w.mu.Unlock()
	w.s.staging.Add(-n)
}

// forget ends the writer for the store: it no longer holds Shutdown up.
func (w *blobWriter) forget() {
	w.unstage()
	w.s.writers.done(w.stage)
}

func newStageID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}
