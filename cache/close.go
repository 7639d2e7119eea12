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
func (s *Store) enter() error {
	s.gate.mu.Lock()
	defer s.gate.mu.Unlock()
	if s.gate.closed {
		return ErrClosed
	}
	s.gate.n++
	return nil
}

// leave ends an operation started by enter.
func (s *Store) leave() {
	s.gate.mu.Lock()
	defer s.gate.mu.Unlock()
	s.gate.n--
	if s.gate.n == 0 && s.gate.idle != nil {
		close(s.gate.idle)
		s.gate.idle = nil
	}
}

func (s *Store) isClosed() bool {
	s.gate.mu.Lock()
	defer s.gate.mu.Unlock()
	return s.gate.closed
}

// refuseWriters makes NewBlobWriter, PutMeta and DeleteMeta fail with
// ErrClosed from now on. It returns a channel closed when no writer is
// open any more (nil when none is open now).
func (s *Store) refuseWriters() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing = true
	if len(s.active) == 0 {
		return nil
	}
	if s.drained == nil {
		s.drained = make(chan struct{})
	}
	return s.drained
}

// refusing reports whether the store refuses new writes.
func (s *Store) refusing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// Shutdown closes the store gracefully. At once, NewBlobWriter, PutMeta
// and DeleteMeta fail with ErrClosed; everything else goes on. Shutdown
// then waits until every BlobWriter already open is closed or aborted
// (Commit alone does not end a writer: readers may still read through it
// until Close), or until ctx is done, and then closes the database, after
// the reads and writes under way (short, single operations) are over.
// From then on every method of the store, and of readers and writers
// still open, fails with ErrClosed.
//
// The database is closed in every case. When ctx ended the wait, the
// error wraps ctx's error and says how many writers were abandoned; what
// they staged is removed by the next Open. Shutdown and Close may be
// called more than once; only the first closes the database.
func (s *Store) Shutdown(ctx context.Context) error {
	var abandoned error
	if drained := s.refuseWriters(); drained != nil {
		if h := s.hooks.shutdownWaits; h != nil {
			h()
		}
		select {
		case <-drained:
		case <-ctx.Done():
			s.mu.Lock()
			n := len(s.active)
			s.mu.Unlock()
			abandoned = fmt.Errorf("cache: closed with %d archive writers still open: %w", n, context.Cause(ctx))
		}
	}
	return errors.Join(abandoned, s.closeDB())
}

// Close closes the store without waiting for writers still open, which
// are abandoned: their later calls fail with ErrClosed, and what they
// staged is removed by the next Open. It waits only for the reads and
// writes under way, as Shutdown does. Use Shutdown to let writers finish.
func (s *Store) Close() error {
	s.refuseWriters()
	return s.closeDB()
}

// closeDB stops the free-space checks and the eviction goroutine, and
// closes Badger once no operation is under way.
func (s *Store) closeDB() error {
	if s.stopWatch != nil { // it may reopen the database
		s.stopWatch()
		<-s.watchDone
	}
	s.stopCounting()
	s.stopEvicting()
	s.gate.mu.Lock()
	if s.gate.closed {
		s.gate.mu.Unlock()
		return nil
	}
	s.gate.closed = true
	var idle chan struct{}
	if s.gate.n > 0 {
		idle = make(chan struct{})
		s.gate.idle = idle
	}
	s.gate.mu.Unlock()
	if idle != nil {
		if h := s.hooks.closeWaits; h != nil {
			h()
		}
		<-idle
	}
	s.dbmu.Lock()
	defer s.dbmu.Unlock()
	if s.db == nil { // never opened: the disk was full at start-up
		return nil
	}
	err := s.db.Close()
	s.db = nil
	if err != nil {
		return fmt.Errorf("cache: closing: %w", err)
	}
	return nil
}
