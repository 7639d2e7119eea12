// What test rigs do to a store and production code never does.

package cache

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Rig does to a store what the tests of other packages need and
// production code never does: delete an archive whatever holds it,
// damage one where it is stored (or change it where its checksums
// cannot tell), count the chunks stored, and run an
// eviction pass and wait for it. Test rigs reach it through
// internal/testrig/cachetest. Nothing in the shipped binary calls RigOf, so the
// linker leaves Rig out: cmd/tfmirror's TestBinaryLinksNoTestHook checks
// the built binary for its symbols.
type Rig struct{ s *Blobs }

// RigOf returns the rig of s. Test rigs only.
func RigOf(s *Store) Rig { return Rig{s.Blobs} }

// DeleteBlob deletes the committed archive sha: its record, then its
// chunks, whether it is open for reading or not.
func (r Rig) DeleteBlob(sha string) error {
	if err := checkSHA(sha); err != nil {
		return err
	}
	return r.s.deleteBlob(sha, nil)
}

// ChunkCount returns how many archive chunks the database holds,
// committed or not: once the store cleaned up after a failed or
// interrupted write, every chunk belongs to a committed archive or to a
// write under way.
func (r Rig) ChunkCount() (int, error) {
	n := 0
	err := r.s.db.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("c/"), PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	return n, err
}

// FlipBlobByte inverts byte off of the committed archive sha where it is
// stored, as a failing disk would, leaving its record as it is.
func (r Rig) FlipBlobByte(sha string, off int64) error {
	return r.s.db.update(entryCost(64, r.s.chunkSize), func(txn *badger.Txn) error {
		_, _, _, err := flipByte(txn, sha, off)
		return err
	})
}

// AlterBlobByte inverts byte off of the committed archive sha where it is
// stored, and the checksum its record keeps for the byte's chunk with
// it, so that the store reads the byte back as stored: an archive
// written wrong, or changed where it is stored by whoever can write the
// data directory. Only its sha256 tells.
func (r Rig) AlterBlobByte(sha string, off int64) error {
	return r.s.db.update(entryCost(64, r.s.chunkSize+512), func(txn *badger.Txn) error {
		rec, idx, val, err := flipByte(txn, sha, off)
		if err != nil {
			return err
		}
		sums := append([]byte(nil), rec.Sums...)
		binary.BigEndian.PutUint64(sums[idx*sumSize:], chunkSum(val))
		rec.Sums = sums
		return writeRecord(txn, rec)
	})
}

// FailPings has the test write of every Ping from now on fail with err
// (nil: succeed again), as a database that no longer takes writes does
// while the disk still has room; the next Ping probes (it forgets its
// last answer, and the writes since).
func (r Rig) FailPings(err error) {
	d := r.s.db
	d.ping.mu.Lock()
	defer d.ping.mu.Unlock()
	d.hooks.pingWrite = nil
	if err != nil {
		d.hooks.pingWrite = func() error { return err }
	}
	d.ping.at = time.Time{}
	d.lastWrite.Store(0)
}

// flipByte inverts byte off of the committed archive sha in txn, and
// returns the archive's record, the index of the byte's chunk and the
// chunk as it is now.
func flipByte(txn *badger.Txn, sha string, off int64) (blobRecord, int, []byte, error) {
	rec, err := readRecord(txn, sha)
	if err != nil {
		return rec, 0, nil, err
	}
	if off < 0 || off >= rec.Size {
		return rec, 0, nil, fmt.Errorf("cache: byte %d of a %d-byte archive", off, rec.Size)
	}
	idx := int(off / int64(rec.ChunkSize))
	key := chunkKey(rec.Stage, idx)
	item, err := txn.Get(key)
	if err != nil {
		return rec, 0, nil, err
	}
	val, err := item.ValueCopy(nil)
	if err != nil {
		return rec, 0, nil, err
	}
	val[off%int64(rec.ChunkSize)] ^= 0xff
	return rec, idx, val, txn.Set(key, val)
}

// DropChunkSums rewrites the commit record of every archive without the
// checksums of its chunks, as a release before them wrote it, and
// returns how many it rewrote.
func (r Rig) DropChunkSums() (int, error) {
	var withSums []blobRecord
	err := r.scanRecords(func(rec blobRecord) error {
		if len(rec.Sums) > 0 {
			rec.Sums = nil
			withSums = append(withSums, rec)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	err = r.s.db.update(entryCost(64, 512)*int64(len(withSums)), func(txn *badger.Txn) error {
		for _, rec := range withSums {
			if err := writeRecord(txn, rec); err != nil {
				return err
			}
		}
		return nil
	})
	return len(withSums), err
}

// WithoutChunkSums returns how many committed archives' records have no
// checksums of their chunks.
func (r Rig) WithoutChunkSums() (int, error) {
	var n int
	err := r.scanRecords(func(rec blobRecord) error {
		if len(rec.Sums) != rec.Chunks*sumSize {
			n++
		}
		return nil
	})
	return n, err
}

// scanRecords calls fn with every commit record, as ScanBlobs reads them.
func (r Rig) scanRecords(fn func(blobRecord) error) error {
	p := []byte("b/")
	return scanBatched(r.s.db, p, p, scanBatch, func(_, val []byte) (blobRecord, error) {
		var rec blobRecord
		err := json.Unmarshal(val, &rec)
		return rec, err
	}, fn)
}

// MarkDamaged marks the committed archive sha as a read that found its
// stored bytes damaged does (ErrDamaged), without damaging them.
func (r Rig) MarkDamaged(sha string) error {
	var rec blobRecord
	err := r.s.db.view(func(txn *badger.Txn) (err error) {
		rec, err = readRecord(txn, sha)
		return err
	})
	if err != nil {
		return err
	}
	r.s.markDamaged(sha, rec.Stage)
	return nil
}

// Evict runs an eviction pass now and waits until it is over
// (Store.EvictNow).
func (r Rig) Evict(ctx context.Context) error { return r.s.evict.now(ctx) }
