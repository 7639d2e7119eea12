// Transactions and the guards every database access goes through.

package cache

import "github.com/dgraph-io/badger/v4"

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
	if !s.dbmu.TryRLock() {
		if h := s.hooks.dbWaits; h != nil {
			h()
		}
		s.dbmu.RLock()
	}
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
		s.writeMu.RLock()
		defer s.writeMu.RUnlock()
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
		if err := wb.Flush(); err != nil {
			return err
		}
		s.deletes.Add(1)
		s.kickGC() // the space returns to the disk once RunGC settled the deletions
		return nil
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
