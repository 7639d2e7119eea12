// Committed blob records: stat, open, delete, list and count.

package cache

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/tfmirror/tfmirror/internal/sha256hex"
)

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
	if !sha256hex.Valid(sha) {
		return fmt.Errorf("cache: %q is not a sha256 in lowercase hex", sha)
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

// deleteBlob removes a committed blob: its record first, so it is never
// visible half-deleted, then its chunks. Eviction uses it; tests of other
// packages get it through internal/cachetest.
func (s *Store) deleteBlob(sha string) error {
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
// Right after Open, while the archives are counted, it waits for the
// count.
func (s *Store) Stats() (archives int, bytes int64) {
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
func (s *Store) ScanBlobs(fn func(sha string, size int64) error) error {
	type sized struct {
		sha  string
		size int64
	}
	p := []byte("b/")
	return scanBatched(s, p, p, scanBatch, func(key, val []byte) (sized, error) {
		var rec struct { // the part of a commit record read here
			Size int64 `json:"size"`
		}
		err := json.Unmarshal(val, &rec)
		return sized{sha: string(key[len(p):]), size: rec.Size}, err
	}, func(b sized) error { return fn(b.sha, b.size) })
}
