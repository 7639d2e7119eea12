// Package logwriter is where log lines are written from many goroutines.
// It takes their writing off the request path (why: BENCHMARKS.md, "The
// access log off the request path"): a Writer appends each line to a
// buffer that one goroutine writes out in a single call, at most Linger
// after the first line into an empty buffer. Nothing is dropped: when the
// buffer is full, writers wait. An Exclusive keeps each line whole where
// they are written as they come (a command's standard error).
//
// It is not a logger and knows nothing of lines' contents. Lines still in
// the buffer when the process is killed are lost; Close (called on every
// way out of serve) writes them first.
package logwriter

import (
	"io"
	"sync"
	"time"
)

// DefaultLimit is the buffer size at which writers start to wait.
const DefaultLimit = 1 << 20

// Linger is how long the goroutine lets lines gather after the first one,
// unless the buffer is half full first.
const Linger = 2 * time.Millisecond

// Writer is an io.Writer that hands its input to a background goroutine,
// which writes it to the underlying writer in order. Each Write is kept
// whole: it is never split across, or interleaved with, other writes. It
// is safe for concurrent use.
type Writer struct {
	w     io.Writer
	limit int

	mu      sync.Mutex
	room    sync.Cond     // signalled when the goroutine takes the buffer
	pending []byte        // written, not yet taken by the goroutine
	spare   []byte        // the goroutine's last batch, to reuse
	closed  bool          // no more buffering; Write goes straight through
	err     error         // the first error of the underlying writer
	wake    chan struct{} // capacity 1: the buffer is no longer empty
	hurry   chan struct{} // capacity 1: the buffer is half full, or closed
	done    chan struct{} // closed when the goroutine has returned
}

// New returns a Writer that writes to w, buffering up to limit bytes
// (DefaultLimit if limit <= 0) before Write waits. Close it to write
// what is buffered and stop its goroutine.
func New(w io.Writer, limit int) *Writer {
	if limit <= 0 {
		limit = DefaultLimit
	}
	lw := &Writer{
		w:     w,
		limit: limit,
		wake:  make(chan struct{}, 1),
		hurry: make(chan struct{}, 1),
		done:  make(chan struct{}),
	}
	lw.room.L = &lw.mu
	go lw.run()
	return lw
}

// Write buffers p (copying it) and returns len(p). It waits while the
// buffer holds limit bytes or more. After Close it writes p straight to
// the underlying writer.
func (lw *Writer) Write(p []byte) (int, error) {
	lw.mu.Lock()
	for !lw.closed && len(lw.pending) > 0 && len(lw.pending)+len(p) > lw.limit {
		lw.room.Wait()
	}
	if lw.closed {
		// After the goroutine's last batch, so that lines stay in order.
		lw.mu.Unlock()
		<-lw.done
		lw.mu.Lock()
		defer lw.mu.Unlock()
		return lw.w.Write(p)
	}
	first := len(lw.pending) == 0
	lw.pending = append(lw.pending, p...)
	half := len(lw.pending) >= lw.limit/2
	lw.mu.Unlock()
	if first {
		signal(lw.wake)
	}
	if half {
		signal(lw.hurry)
	}
	return len(p), nil
}

// signal makes a send on c (capacity 1) pending, if none is.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// run writes batches until Close, then what is left.
func (lw *Writer) run() {
	defer close(lw.done)
	linger := time.NewTimer(Linger)
	linger.Stop()
	for {
		<-lw.wake
		linger.Reset(Linger)
		select {
		case <-linger.C:
		case <-lw.hurry:
			linger.Stop()
		}
		lw.mu.Lock()
		batch := lw.pending
		lw.pending = lw.spare[:0]
		closed := lw.closed
		lw.room.Broadcast()
		lw.mu.Unlock()
		if len(batch) > 0 {
			_, err := lw.w.Write(batch)
			lw.mu.Lock()
			if err != nil && lw.err == nil {
				lw.err = err
			}
			// The written batch's buffer takes the next turn, unless a
			// burst grew it far past the limit.
			if cap(batch) <= 2*lw.limit {
				lw.spare = batch[:0]
			}
			lw.mu.Unlock()
		}
		if closed {
			return
		}
	}
}

// Close writes what is buffered, stops the goroutine and returns the first
// error of the underlying writer, if any. Later Writes go straight to the
// underlying writer. Close is safe to call more than once.
func (lw *Writer) Close() error {
	lw.mu.Lock()
	already := lw.closed
	lw.closed = true
	lw.room.Broadcast()
	lw.mu.Unlock()
	if !already {
		// A pending signal that the goroutine has yet to take is as good:
		// it sees closed when it takes the buffer.
		signal(lw.wake)
		signal(lw.hurry)
	}
	<-lw.done
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.err
}

// Exclusive makes each Write to the writer it wraps exclusive, so that
// lines written from several goroutines at once are never interleaved,
// whatever the writer. It is safe for concurrent use.
type Exclusive struct {
	mu sync.Mutex
	w  io.Writer
}

// NewExclusive returns an Exclusive writing to w.
func NewExclusive(w io.Writer) *Exclusive { return &Exclusive{w: w} }

// Write writes p to the wrapped writer, alone.
func (e *Exclusive) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.w.Write(p)
}
