// Chunks that belong to no committed blob and no open writer.

package cache

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// cleanOrphans removes chunks that belong to no committed blob and to no
// writer of this process: what a crash or failed write left behind. It is
// safe while writers run: chunks are listed first, then the writers under
// way, then the commit records; a writer whose chunk was listed was
// registered before it wrote it, so it is either still under way, or
// committed (its record is written before it stops being under way), or
// abandoned.
func (s *Blobs) cleanOrphans() (int, error) {
	var stages map[string]int
	err := s.db.view(func(txn *badger.Txn) error {
		stages = chunkStages(txn)
		return nil
	})
	if err != nil || len(stages) == 0 {
		return 0, ignoreNoDB(err)
	}
	s.writers.notActive(stages)
	err = s.db.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("b/")})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			var rec struct { // the part of a commit record read here
				Stage string `json:"stage"`
			}
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
	return s.removeStages(stages)
}

// chunkStages returns the stages of the chunks txn sees, with their
// chunk counts.
func chunkStages(txn *badger.Txn) map[string]int {
	stages := make(map[string]int)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("c/"), PrefetchValues: false})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		stage, _, _ := strings.Cut(strings.TrimPrefix(string(it.Item().Key()), "c/"), "/")
		stages[stage]++
	}
	return stages
}

// removeStages deletes the chunks of stages (stage ids, of chunks no
// commit record refers to), but those of writers under way, and returns
// how many it deleted.
func (s *Blobs) removeStages(stages map[string]int) (int, error) {
	s.writers.notActive(stages)
	if len(stages) == 0 {
		return 0, nil
	}
	var orphans [][]byte
	err := s.db.view(func(txn *badger.Txn) error {
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
	// Found by a pass over the records, which a damaged table cuts short.
	if err := s.db.checkTables(); err != nil {
		return 0, err
	}
	if err := s.db.deleteKeys(orphans); err != nil {
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
