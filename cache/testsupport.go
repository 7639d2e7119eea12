package cache

import (
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/tfmirror/tfmirror/internal/testhooks"
)

// What tests in other packages need of a store and production code must
// not call, handed to internal/cachetest (see package testhooks).
func init() {
	testhooks.DeleteBlob = func(s any, sha string) error { return s.(*Store).deleteBlob(sha) }
	testhooks.ChunkCount = func(s any) (int, error) { return s.(*Store).chunkCount() }
	testhooks.FlipBlobByte = func(s any, sha string, off int64) error { return s.(*Store).flipBlobByte(sha, off) }
}

// flipBlobByte inverts byte off of the committed archive sha where it is
// stored, as a failing disk would, leaving its record as it is.
func (s *Store) flipBlobByte(sha string, off int64) error {
	return s.update(entryCost(64, s.chunkSize), func(txn *badger.Txn) error {
		rec, err := s.record(txn, sha)
		if err != nil {
			return err
		}
		if off < 0 || off >= rec.Size {
			return fmt.Errorf("cache: byte %d of a %d-byte archive", off, rec.Size)
		}
		key := chunkKey(rec.Stage, int(off/int64(rec.ChunkSize)))
		item, err := txn.Get(key)
		if err != nil {
			return err
		}
		val, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		val[off%int64(rec.ChunkSize)] ^= 0xff
		return txn.Set(key, val)
	})
}
