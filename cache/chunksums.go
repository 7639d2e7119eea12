// Chunk checksums: every chunk of an archive is checked, as it is read,
// against the XXH3-64 its writer computed, so that a byte a failing disk
// changed is an error (ErrDamaged), never part of an archive served.
// XXH3 finds damage, not intent: whoever can write the data directory can
// write a chunk and its checksum together, which only the archive's
// sha256 tells (tfmirror cache verify; the clients, which check what
// they download against their lock files and the signed checksums).

package cache

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"

	"github.com/dgraph-io/badger/v4"
	"github.com/zeebo/xxh3"
)

// sumSize is the size of one chunk's checksum in blobRecord.Sums.
const sumSize = 8

// chunkSum is the checksum of one chunk's bytes.
func chunkSum(chunk []byte) uint64 { return xxh3.Hash(chunk) }

// appendSum appends the checksum sum to sums, a record's Sums.
func appendSum(sums []byte, sum uint64) []byte { return binary.BigEndian.AppendUint64(sums, sum) }

// sumOf is the checksum of chunk idx in sums, and whether sums has it.
func sumOf(sums []byte, idx int) (uint64, bool) {
	if idx < 0 || (idx+1)*sumSize > len(sums) {
		return 0, false
	}
	return binary.BigEndian.Uint64(sums[idx*sumSize:]), true
}

// copyStride is how much of a chunk is hashed and then copied at a time,
// so that the copy reads bytes the hash has just brought into the CPU's
// cache: one pass over the stored chunk, where hashing it whole before
// the copy made two (BenchmarkBlobRead).
const copyStride = 64 << 10

// copyChecked copies val[off:] into p and returns how much it copied,
// with whether all of val has the checksum want. val is hashed whole,
// whatever part of it is copied.
func copyChecked(p, val []byte, off int, want uint64) (int, bool) {
	h := xxh3.New()
	h.Write(val[:off])
	n := 0
	src := val[off:]
	for len(src) > 0 && n < len(p) {
		k := min(len(src), len(p)-n, copyStride)
		h.Write(src[:k])
		n += copy(p[n:], src[:k])
		src = src[k:]
	}
	h.Write(src)
	return n, h.Sum64() == want
}

// withSums gives b's record the checksums of its archive's chunks. A
// record written by a release before chunk checksums has none: the
// archive is then read whole once and its bytes must have its sha256
// and size (else ErrNotFound and ErrDamaged, and the archive is marked
// as a reader that found it damaged marks it), and the checksums are
// written into its record, so that from then on it is read as every
// archive is.
// Openers of the same archive at once wait for one such read.
//
// When the record cannot be written (a full disk), the checksums are
// used for this reader only, and the next opener reads the archive whole
// again.
func (b *blob) withSums() error {
	if len(b.rec.Sums) == b.rec.Chunks*sumSize {
		return nil
	}
	v, err, _ := b.s.summing.Do(b.rec.Stage, func() (any, error) {
		sums, err := b.sumWhole()
		if err != nil {
			return nil, err
		}
		b.storeSums(sums)
		return sums, nil
	})
	if errors.Is(err, ErrDamaged) {
		// Not cached, as an archive marked damaged is (OpenBlob): the
		// next verified copy replaces it.
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if err != nil {
		return err
	}
	b.rec.Sums = v.([]byte)
	return nil
}

// sumWhole reads b's archive whole, checks its bytes against its sha256
// and size, and returns its chunks' checksums.
func (b *blob) sumWhole() ([]byte, error) {
	s, rec := b.s, b.rec
	sums := make([]byte, 0, rec.Chunks*sumSize)
	h := sha256.New()
	var size int64
	for idx := range rec.Chunks {
		err := s.db.chunkValue(rec.Stage, idx, func(val []byte) error {
			h.Write(val)
			size += int64(len(val))
			sums = appendSum(sums, chunkSum(val))
			return nil
		})
		if errors.Is(err, badger.ErrKeyNotFound) {
			if err = b.missingChunk(idx, err); errors.Is(err, ErrDamaged) {
				s.markDamaged(rec.SHA256, rec.Stage)
				return nil, err
			}
			// Deleted or replaced since it was opened.
			return nil, fmt.Errorf("%w: archive %s", ErrNotFound, rec.SHA256)
		}
		if err != nil {
			return nil, fmt.Errorf("cache: reading chunk %d of %s: %w", idx, rec.Stage, err)
		}
	}
	var detail string
	switch sum := hex.EncodeToString(h.Sum(nil)); {
	case size != rec.Size:
		detail = fmt.Sprintf("%d bytes stored, %d in its record", size, rec.Size)
	case sum != rec.SHA256:
		detail = "its bytes have sha256 " + sum
	default:
		return sums, nil
	}
	err := s.damage(rec.SHA256, rec.Stage, -1, detail)
	s.markDamaged(rec.SHA256, rec.Stage)
	return nil, fmt.Errorf("cache: archive %s: %w", rec.SHA256, err)
}

// storeSums writes sums into the commit record of b's archive, if it is
// still b's copy and has none.
func (b *blob) storeSums(sums []byte) {
	s, rec := b.s, b.rec
	unlock := s.lockBlob(rec.SHA256)
	defer unlock()
	err := s.db.update(entryCost(len(blobKey(rec.SHA256)), 512+len(sums)*2), func(txn *badger.Txn) error {
		cur, err := readRecord(txn, rec.SHA256)
		if err != nil || cur.Stage != rec.Stage || cur.Damaged || len(cur.Sums) > 0 {
			return err // replaced, deleted or marked since it was opened
		}
		cur.Sums = sums
		return writeRecord(txn, cur)
	})
	if err != nil {
		level := min(WriteFailureLevel(err), slog.LevelWarn)
		if errors.Is(err, ErrClosed) {
			level = slog.LevelDebug // the store is closing
		}
		s.log.Log(context.Background(), level,
			"the chunk checksums of a cached archive could not be stored: it is read whole again when it is next opened",
			"sha256", rec.SHA256, "error", err)
	}
}
