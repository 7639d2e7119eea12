// Value-log garbage collection.

package cache

import (
	"context"
	"time"

	"github.com/dgraph-io/badger/v4"
)

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
