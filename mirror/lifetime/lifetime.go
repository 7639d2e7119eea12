// Package lifetime is the engine's lifetime: the root context that the work
// done for every caller runs on (origin fetches, archive downloads, writes
// to the shared tier), the count of that work which a shutdown waits for,
// the coalescing of concurrent fetches of one thing, the import lock, and
// the holder of the one Notifier told what is served and imported.
//
// The engine's parts take a *Lifetime as a field: it is the machinery they
// share, below them all, and knows nothing of providers, modules or the
// cache.
package lifetime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	"golang.org/x/time/rate"

	"github.com/tfmirror/tfmirror/v2/internal/logbound"
	"github.com/tfmirror/tfmirror/v2/internal/workgroup"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// Notifier is told what the engine serves and imports (retention's
// last-use records and its guard of what cannot be fetched again;
// package retention implements it). Its methods but Importing are called
// on the request path: they must not block.
type Notifier interface {
	// Used says a client asked for a package of the version whose
	// record is keyed key (mirror/inventory.Record.Key).
	Used(key string)
	// Serving says the archive sha of version v of address (kind
	// "provider" or "module") is about to be served, or cached for a
	// sync (mirror.Engine.EnsureArchive), and fetched first when it is
	// not cached.
	Serving(kind, address string, v versions.Version, sha string)
	// ImportBegun says an import began (BeginImport): until its
	// ImportEnded, an archive it said it was Importing may be named by
	// no record yet.
	ImportBegun()
	// Importing says the archive sha is about to be committed by an
	// import under way: it cannot be fetched again. Called by imports
	// only (Import.Importing), before they look for sha in the cache, it
	// may wait for a removal of sha under way to end, so that they find
	// it either kept or gone.
	Importing(sha string)
	// ImportEnded says an import that began ended (Import.End): the
	// records of versions that cannot be fetched again it wrote are
	// written, and it writes no more: an archive it said it was
	// Importing that none of them names (it failed) is not kept on its
	// account.
	ImportEnded()
}

// Metrics receives what the lifetime observes.
type Metrics interface {
	// Coalesced records a request that joined a fetch already under way.
	Coalesced(kind string)
}

// MaxAbandoned bounds the works Coalesce runs on that no caller waits
// for any more (each caller's context ended, or its wait passed): past
// it, a work whose last caller leaves is ended, as its caller's request
// is.
const MaxAbandoned = 256

// Lifetime is the engine's lifetime. Its methods are safe for concurrent
// use. The zero value is not usable: call New.
type Lifetime struct {
	// timeout bounds the work Coalesce runs for its callers.
	timeout time.Duration
	metrics Metrics

	root   context.Context
	cancel context.CancelFunc
	work   tasks
	// flights are the works Coalesce runs, by key: each is counted in
	// work from the ask that starts it to its end, and its callers hold
	// nothing of their own, so that a caller gone leaves nothing behind.
	flightsMu sync.Mutex
	flights   map[string]*flight
	// abandoned counts the flights no caller waits for (flight.abandoned),
	// at most MaxAbandoned.
	abandoned int
	// imports is the import lock: one import, or removal, at a time.
	imports sync.Mutex
	notify  atomic.Pointer[Notifier]
	stale   *logbound.Warnings // of LogStale
	log     *slog.Logger       // of the work that panicked (workgroup.Panicked)
}

// New returns a running lifetime whose Coalesce runs each fetch for at
// most timeout; metrics and log (of the work that panicked) may be nil.
func New(timeout time.Duration, metrics Metrics, log *slog.Logger) *Lifetime {
	if metrics == nil {
		metrics = noMetrics{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Lifetime{timeout: timeout, metrics: metrics, log: log, stale: NewStaleWarnings(), flights: map[string]*flight{}}
	l.work.idle = make(chan struct{})
	close(l.work.idle)
	l.root, l.cancel = context.WithCancel(context.Background())
	return l
}

// Context is the lifetime's root context, which Cancel ends.
func (l *Lifetime) Context() context.Context { return l.root }

// Detached returns a context for work done on behalf of every caller that
// waits for it: it does not end when the caller that started it goes away,
// only at its timeout or when the lifetime is cancelled. done must be
// called when the work ends. It fails with records.ErrShutDown once Stop
// was called.
func (l *Lifetime) Detached(timeout time.Duration) (ctx context.Context, done func(), err error) {
	if !l.work.add() {
		return nil, nil, records.ErrShutDown
	}
	ctx, cancel := context.WithTimeout(l.root, timeout)
	return ctx, func() { cancel(); l.work.done() }, nil
}

// StartWork counts work that Wait waits for; it returns false, counting
// nothing, once Stop was called. EndWork ends it.
func (l *Lifetime) StartWork() bool { return l.work.add() }

// EndWork ends work counted by StartWork.
func (l *Lifetime) EndWork() { l.work.done() }

// ErrStillWaiting is CoalesceWithin's answer when the caller's wait ran
// out before the work ended: the work goes on, for the callers that wait
// for it and for the ones after them, which find what it stored.
var ErrStillWaiting = errors.New("the origin has not answered yet")

// ErrWritten is what a write of a record coalesced with its fetches (an
// import's addition to a version list, a removal's, in turn with the
// list's refreshes) gives the callers of a fetch that joined it: the
// write stored no answer of the origin's, and they go again. The
// writer takes its own outcome from its function, not from Coalesce.
var ErrWritten = errors.New("written in turn with its fetches, not fetched")

// ErrKeptFetching is WriteInTurn's error when a fetch of the record was
// under way each of the rounds it waited.
var ErrKeptFetching = errors.New("fetched again each time it was to be written")

// writeRounds bounds how often WriteInTurn waits for a fetch.
const writeRounds = 32

// WriteInTurn runs write, a write of the record under key, in turn with
// the fetches of it coalesced under kind and key (Coalesce): a fetch
// under way is waited for and write run after it (writeRounds times at
// most, then ErrKeptFetching), so that write reads what the fetch
// stored, never has its own stored over; the callers of a fetch that
// join the write are given ErrWritten. It returns write's error, or why
// write did not run (ctx done, the lifetime stopped: records.ErrShutDown);
// see CoalesceWrite.
func (l *Lifetime) WriteInTurn(ctx context.Context, kind, key string, write func(context.Context) error) error {
	for range writeRounds {
		var werr error
		_, ran, err := l.CoalesceWrite(ctx, kind, key, func(ctx context.Context) (any, error) {
			werr = write(ctx)
			return nil, ErrWritten
		})
		switch {
		case ran && errors.Is(err, workgroup.ErrPanicked):
			return err // write panicked: werr was never set
		case ran:
			return werr
		case errors.Is(err, records.ErrShutDown) || ctx.Err() != nil:
			return err
		}
		// A fetch was under way: go again, on what it stored.
	}
	return ErrKeptFetching
}

// CoalesceWrite is Coalesce for write, a write of the record under key
// in turn with the fetches of it: ran says write ran, and val and err
// are then its own (what the callers that joined it were given too);
// else they are those of the fetch under way that the caller joined, or
// why it did not (ctx done, the lifetime stopped). A caller whose ctx
// ends never leaves write behind it: once write began, it waits for its
// end (within the lifetime's timeout) and returns its outcome; before,
// write is given up and never runs, and a caller that joined it is given
// ErrWritten. So the caller that is told write did not run (an import
// that then ends, and lets go of the import lock) finds nothing written
// after it.
func (l *Lifetime) CoalesceWrite(ctx context.Context, kind, key string, write func(context.Context) (any, error)) (val any, ran bool, err error) {
	const (
		pending = iota
		running
		givenUp
	)
	var mu sync.Mutex
	state := pending
	done := make(chan struct{})
	var wval any
	var werr error
	res, err := l.coalesce(ctx, 0, kind, key, true, func(ctx context.Context) (any, error) {
		mu.Lock()
		if state == givenUp {
			mu.Unlock()
			return nil, ErrWritten
		}
		state = running
		mu.Unlock()
		defer close(done)
		wval, werr = l.call(ctx, key, write)
		return wval, werr
	})
	mu.Lock()
	if state == pending {
		state = givenUp // joined another's work, or gone before write's turn
	}
	began := state == running
	mu.Unlock()
	if began {
		<-done
		return wval, true, werr
	}
	return res, false, err
}

// LogStale logs msg, with its attributes args, of a cached copy served
// stale because its origin failed (StaleMessage for a version list). Every
// request for it does so while its origin is down or slow, as many as
// clients ask: at most staleWarnBurst are logged at warn at once, then one
// every staleWarnEvery, the others at debug with their number on the next
// (each is counted in the metrics all the same).
func (l *Lifetime) LogStale(log *slog.Logger, msg string, args ...any) {
	l.stale.Log(log, time.Now(), msg, args...)
}

// NewStaleWarnings returns the bound of the log lines of cached copies
// served stale (LogStale's), for what logs them apart from a lifetime
// (the CLI releases' lists).
func NewStaleWarnings() *logbound.Warnings {
	return logbound.New(rate.Every(staleWarnEvery), staleWarnBurst, "stale_logged_at_debug")
}

const (
	staleWarnBurst = 10
	staleWarnEvery = time.Minute
)

// StaleMessage is the log line of a cached copy of what (a version list)
// served, stale, because the coalesced refresh of it failed with err, or
// is still waited for (ErrStillWaiting).
func StaleMessage(err error, what string) string {
	if errors.Is(err, ErrStillWaiting) {
		return "origin slow to answer, serving cached " + what + "; its refresh goes on"
	}
	return "origin failed, serving cached " + what
}

// Coalesce runs fn once for all concurrent callers with the same key, on a
// context detached from any one of them (see Detached). A caller whose own
// context ends stops waiting; the work goes on for the others. A caller
// that joined a fetch under way is counted as coalesced under kind.
func (l *Lifetime) Coalesce(ctx context.Context, kind, key string, fn func(context.Context) (any, error)) (any, error) {
	return l.coalesce(ctx, 0, kind, key, false, fn)
}

// CoalesceWithin is Coalesce for a caller that has something to answer
// with when the work takes long (a list the cache holds, stale): it waits
// at most wait (0: as long as its context lets it), then stops waiting
// with ErrStillWaiting while the work goes on.
func (l *Lifetime) CoalesceWithin(ctx context.Context, wait time.Duration, kind, key string, fn func(context.Context) (any, error)) (any, error) {
	return l.coalesce(ctx, wait, kind, key, false, fn)
}

// coalesce is CoalesceWithin; a work started with kept (a write: see
// CoalesceWrite) is never ended for want of callers.
func (l *Lifetime) coalesce(ctx context.Context, wait time.Duration, kind, key string, kept bool, fn func(context.Context) (any, error)) (any, error) {
	// The work is counted (Detached) as it is asked for, before the
	// goroutine that runs fn begins, so that Wait does not find the
	// lifetime idle meanwhile; once stopped, no work is taken. A caller
	// that joined work under way is counted as coalesced however its
	// wait ends.
	l.flightsMu.Lock()
	f, joined := l.flights[key]
	if !joined {
		wctx, done, err := l.Detached(l.timeout)
		if err != nil {
			l.flightsMu.Unlock()
			return nil, err
		}
		wctx, cancel := context.WithCancel(wctx)
		f = &flight{done: make(chan struct{}), cancel: cancel, kept: kept}
		l.flights[key] = f
		workgroup.Go(l.log, func() { l.run(wctx, key, f, done, fn) }, "key", key)
	} else if f.abandoned {
		f.abandoned = false
		l.abandoned--
	}
	f.waiters++
	l.flightsMu.Unlock()
	if joined {
		l.metrics.Coalesced(kind)
	}
	var waited <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		waited = t.C
	}
	select {
	case <-f.done:
		return f.val, f.err
	case <-ctx.Done():
		l.leave(key, f)
		return nil, fmt.Errorf("waiting for the origin: %w", ctx.Err())
	case <-waited:
		l.leave(key, f)
		return nil, fmt.Errorf("%w after %s", ErrStillWaiting, wait)
	}
}

// flight is one run of a work Coalesce runs for all the callers of its
// key: done is closed once val and err are set.
type flight struct {
	done   chan struct{}
	val    any
	err    error
	cancel context.CancelFunc // ends the work
	kept   bool               // never ended for want of callers (a write)

	// Under Lifetime.flightsMu: the callers waiting for it; whether
	// none does and it is counted in Lifetime.abandoned; whether it has
	// ended.
	waiters   int
	abandoned bool
	ended     bool
}

// leave is a caller of f (the work of key) that stops waiting for it.
// The last one leaves the work to go on, for the next callers and the
// cache, while fewer than MaxAbandoned do; past that it ends the work, as
// a stranger asking for names in a loop and going away at once would
// otherwise hold a goroutine and an origin request for each until the
// origin timeout.
func (l *Lifetime) leave(key string, f *flight) {
	l.flightsMu.Lock()
	defer l.flightsMu.Unlock()
	if f.waiters--; f.waiters > 0 || f.ended || f.kept {
		return
	}
	if l.abandoned < MaxAbandoned {
		f.abandoned = true
		l.abandoned++
		return
	}
	if l.flights[key] == f {
		delete(l.flights, key) // the next caller starts the work anew
	}
	f.cancel()
}

// run runs fn on ctx for the callers of f, and ends the work (done) once
// they have its outcome: the key is free for the next work first. A
// panic of fn is its error (workgroup.Panicked).
func (l *Lifetime) run(ctx context.Context, key string, f *flight, done func(), fn func(context.Context) (any, error)) {
	defer done()
	f.val, f.err = l.call(ctx, key, fn)
	f.cancel() // the work's context, which leave may end before
	l.flightsMu.Lock()
	if l.flights[key] == f {
		delete(l.flights, key)
	}
	if f.abandoned {
		f.abandoned = false
		l.abandoned--
	}
	f.ended = true
	l.flightsMu.Unlock()
	close(f.done)
}

// call runs fn, the work of key, on ctx: a panic of fn is its error
// (workgroup.Panicked).
func (l *Lifetime) call(ctx context.Context, key string, fn func(context.Context) (any, error)) (val any, err error) {
	return workgroup.Guarded(l.log, func() (any, error) { return fn(ctx) }, "key", key)()
}

// Import is an import under way, begun by BeginImport: the archives
// it is about to commit are told to the Notifier through it (Importing),
// and End tells it the import ended. An archive is marked as imported
// only within an Import, which the Notifier in force when it began hears
// of whole.
type Import struct {
	n    Notifier
	once sync.Once
}

// BeginImport begins an import. End it, once and whatever the outcome,
// after the import wrote its records or failed.
func (l *Lifetime) BeginImport() *Import {
	n := l.Notifier()
	n.ImportBegun()
	return &Import{n: n}
}

// Importing says the archive sha is about to be committed by the import
// (Notifier.Importing); it may wait for a removal of sha under way.
func (i *Import) Importing(sha string) { i.n.Importing(sha) }

// End says the import ended (Notifier.ImportEnded); calls after the
// first do nothing.
func (i *Import) End() { i.once.Do(i.n.ImportEnded) }

// Imports is the import lock: one import, or removal, at a time.
func (l *Lifetime) Imports() sync.Locker { return &l.imports }

// Notifier is the Notifier set by SetNotifier, or one that does nothing.
func (l *Lifetime) Notifier() Notifier {
	if p := l.notify.Load(); p != nil {
		return *p
	}
	return noNotifier{}
}

// SetNotifier makes n the Notifier from now on. There is one: it fails
// when one was set already.
func (l *Lifetime) SetNotifier(n Notifier) error {
	if n == nil {
		return errors.New("mirror: a nil Notifier")
	}
	if !l.notify.CompareAndSwap(nil, &n) {
		return errors.New("mirror: the engine has a Notifier already")
	}
	return nil
}

// Stop takes no more work: StartWork returns false and Detached fails
// from now on. The work under way goes on.
func (l *Lifetime) Stop() { l.work.close() }

// Wait blocks until no counted work runs (work asked of Coalesce counts
// from the ask on), or ctx is done.
func (l *Lifetime) Wait(ctx context.Context) error { return l.work.wait(ctx) }

// Cancel ends the root context, and so every Detached context.
func (l *Lifetime) Cancel() { l.cancel() }

// tasks counts work running on the root context, so that Wait can wait
// for it (a sync.WaitGroup may not be waited on while it can be
// incremented from zero).
type tasks struct {
	mu     sync.Mutex
	n      int
	closed bool
	idle   chan struct{} // closed while n == 0
}

// add counts one more task, unless the lifetime is stopped.
func (t *tasks) add() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	if t.n == 0 {
		t.idle = make(chan struct{})
	}
	t.n++
	return true
}

func (t *tasks) done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n--
	if t.n == 0 {
		close(t.idle)
	}
}

func (t *tasks) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
}

func (t *tasks) wait(ctx context.Context) error {
	t.mu.Lock()
	idle := t.idle
	t.mu.Unlock()
	return workgroup.Wait(ctx, idle) // a lifetime with no work is idle, whatever ctx
}

type noMetrics struct{}

func (noMetrics) Coalesced(string) {}

type noNotifier struct{}

func (noNotifier) Used(string)                                      {}
func (noNotifier) Serving(string, string, versions.Version, string) {}
func (noNotifier) ImportBegun()                                     {}
func (noNotifier) Importing(string)                                 {}
func (noNotifier) ImportEnded()                                     {}
