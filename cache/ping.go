// Ping: a cheap, shared answer to whether the database is open and writable.

package cache

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
)

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
func (s *Store) Ping() error { return s.db.pingNow() }

// pingNow is Ping.
func (d *database) pingNow() error {
	if err := d.writable(); err != nil {
		return err
	}
	d.ping.mu.Lock()
	defer d.ping.mu.Unlock()
	now := d.space.Now()
	if age := now.Sub(d.ping.at); !d.ping.at.IsZero() && age >= 0 && age < PingInterval {
		return d.ping.err
	}
	if last := d.lastWrite.Load(); last != 0 {
		if age := now.Sub(time.Unix(0, last)); age >= 0 && age < PingInterval {
			d.ping.at, d.ping.err = now, nil
			return nil
		}
	}
	d.ping.err = d.probe(now)
	d.ping.at = now
	return d.ping.err
}

// probe writes a small key and reads it back. Caller holds d.ping.mu, so
// that no other probe changes the key in between.
func (d *database) probe(now time.Time) error {
	if h := d.hooks.pingWrite; h != nil {
		if err := h(); err != nil {
			return fmt.Errorf("cache: not writable: %w", err)
		}
	}
	key := []byte("p/ping")
	val := []byte(now.UTC().Format(time.RFC3339Nano))
	if err := d.update(entryCost(len(key), len(val)), func(txn *badger.Txn) error { return txn.Set(key, val) }); err != nil {
		if errors.Is(err, ErrNotWritable) || errors.Is(err, ErrClosed) {
			return err
		}
		return fmt.Errorf("cache: not writable: %w", err)
	}
	return d.view(func(txn *badger.Txn) error {
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
