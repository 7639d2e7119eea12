package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrClosed is returned by a Store's methods once it is shut down or
// closed (NewBlobWriter, PutMeta and DeleteMeta as soon as Shutdown
// starts), and by the readers and writers it left open.
var ErrClosed = errors.New("cache: closed")

// opGate lets Shutdown and Close wait for the Badger operations under way
// (each a short read, write or scan) before closing the database, and
// turns every later one into ErrClosed: Badger must not be used during or
// after its Close.
type opGate struct {
	mu     sync.Mutex
	closed bool
	n      int           // operations under way
	idle   chan struct{} // closed when n drops to 0 after closed is set
}

// enter starts an operation on the database, or returns ErrClosed. An
// operation may enter again inside itself (a scan's callback): it then
// gets ErrClosed if the store closed meanwhile, and never waits.
func (d *database) enter() error {
	d.gate.mu.Lock()
	defer d.gate.mu.Unlock()
	if d.gate.closed {
		return ErrClosed
	}
	d.gate.n++
	return nil
}

// leave ends an operation started by enter.
func (d *database) leave() {
	d.gate.mu.Lock()
	defer d.gate.mu.Unlock()
	d.gate.n--
	if d.gate.n == 0 && d.gate.idle != nil {
		close(d.gate.idle)
		d.gate.idle = nil
	}
}

func (d *database) isClosed() bool {
	d.gate.mu.Lock()
	defer d.gate.mu.Unlock()
	return d.gate.closed
}

// close closes Badger once no operation is under way; every later
// operation fails with ErrClosed. Only the first call closes.
func (d *database) close() error {
	d.gate.mu.Lock()
	if d.gate.closed {
		d.gate.mu.Unlock()
		return nil
	}
	d.gate.closed = true
	var idle chan struct{}
	if d.gate.n > 0 {
		idle = make(chan struct{})
		d.gate.idle = idle
	}
	d.gate.mu.Unlock()
	if idle != nil {
		if h := d.hooks.closeWaits; h != nil {
			h()
		}
		<-idle
	}
	d.dbmu.Lock()
	defer d.dbmu.Unlock()
	// The directory is another process's to open once Badger is closed.
	defer d.dirLock.Release()
	if d.bdb == nil { // never opened: the disk was full at start-up
		return nil
	}
	err := d.bdb.Close()
	d.bdb = nil
	if err != nil {
		return fmt.Errorf("cache: closing: %w", err)
	}
	return nil
}

// Shutdown closes the store gracefully. At once, NewBlobWriter, PutMeta
// and DeleteMeta fail with ErrClosed; everything else goes on. Shutdown
// then waits until every BlobWriter already open is closed or aborted
// (Commit alone does not end a writer: readers may still read through it
// until Close), or until ctx is done, and then closes the database, after
// the reads and writes under way (short, single operations) are over.
// From then on every method of the store, and of readers still open,
// fails with ErrClosed. A writer still open (one the wait abandoned)
// stores nothing more: its Write goes on, as BlobWriter's does after any
// failure to store, for the followers that read from it, Err reports the
// failure and Commit fails; its followers read only the chunks it still
// holds in memory, and fail on any other.
//
// The database is closed in every case. When ctx ended the wait, the
// error wraps ctx's error and says how many writers were abandoned; what
// they staged is removed by the next Open. Shutdown and Close may be
// called more than once; only the first closes the database.
func (s *Store) Shutdown(ctx context.Context) error {
	var abandoned error
	if drained := s.writers.refuse(); drained != nil {
		if h := s.hooks.shutdownWaits; h != nil {
			h()
		}
		select {
		case <-drained:
		case <-ctx.Done():
			// With the writers' end ready too, the select picks either at
			// random: writers all closed by now are not abandoned.
			if n := s.writers.open(); n > 0 {
				abandoned = fmt.Errorf("cache: closed with %d archive writers still open: %w", n, context.Cause(ctx))
			}
		}
	}
	return errors.Join(abandoned, s.closeDB())
}

// Close closes the store without waiting for writers still open, which
// are abandoned: their later calls fail with ErrClosed, and what they
// staged is removed by the next Open. It waits only for the reads and
// writes under way, as Shutdown does. Use Shutdown to let writers finish.
func (s *Store) Close() error {
	s.writers.refuse()
	return s.closeDB()
}

// closeDB stops the free-space checks, the count, the eviction goroutine
// and the value-log GC, collects what the GC had not yet collected
// (collectBeforeClose, with Options.CollectAtClose), and closes Badger
// once no operation is under way.
func (s *Store) closeDB() error {
	if s.stopWatch != nil { // it may reopen the database
		s.stopWatch()
		<-s.watchDone
	}
	s.stopCounting()
	s.evict.stop()
	if s.stopGC != nil {
		s.stopGC()
		<-s.gcDone
		if s.collect {
			s.gc.collectBeforeClose()
		}
	}
	return s.db.close()
}
