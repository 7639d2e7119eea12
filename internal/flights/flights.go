// Package flights runs work once for all the callers that ask for it by
// one key at the same time, apart from them (a detached origin fetch, a
// shared service discovery): a caller that goes away does not end the
// work for the others; only Close does. Close ends the work under way and
// returns once it has ended; a caller still waiting for work Close ended,
// and one asking afterwards, get ErrClosed, never the cut work's
// cancellation. The owner that closes it owns every goroutine it starts.
// Work that panics (a bug of the mirror's, on a goroutine of the group's
// that no handler's recovery reaches) fails for its callers with
// workgroup.ErrPanicked, logged with its stack: it does not end the
// process.
package flights

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"golang.org/x/sync/singleflight"

	"github.com/tfmirror/tfmirror/v2/internal/workgroup"
)

// ErrClosed is the error of work asked for after Close, or ended by it.
var ErrClosed = errors.New("closed")

// Group is the work under way, by key. Make one with New.
type Group struct {
	root context.Context // ended by Close
	stop context.CancelFunc
	sf   singleflight.Group
	log  *slog.Logger // of work that panicked

	// The work under way, counted so that Close can wait for it: a
	// sync.WaitGroup alone may not be waited on while it can still be
	// incremented from zero, so Start refuses once closed.
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// New returns a Group with no work under way, which logs work that
// panicked to log.
func New(log *slog.Logger) *Group {
	g := &Group{log: log}
	g.root, g.stop = context.WithCancel(context.Background())
	return g
}

// Do runs fn once for key for every caller asking at the same time, and
// returns its result, or ctx's error as soon as ctx ends (the work goes
// on for the others). fn runs on a context that carries ctx's values and
// that only Close ends. Work that Close ended, or asked for after Close,
// is ErrClosed.
func (g *Group) Do(ctx context.Context, key string, fn func(context.Context) (any, error)) (any, error) {
	// Asked before joining work under way: work that Close ended lets
	// Close return a moment before it leaves the group, and a caller that
	// joined it then would get its result.
	if g.root.Err() != nil {
		return nil, ErrClosed
	}
	ch := g.sf.DoChan(key, workgroup.Guarded(g.log, func() (any, error) {
		if !g.start() {
			return nil, ErrClosed
		}
		defer g.wg.Done()
		wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		defer context.AfterFunc(g.root, cancel)()
		v, err := fn(wctx)
		if err != nil && g.root.Err() != nil {
			return nil, ErrClosed // ended by Close, whatever fn said of it
		}
		return v, err
	}, "key", key))
	select {
	case r := <-ch:
		return r.Val, r.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// start counts one more piece of work; false once closed.
func (g *Group) start() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	return true
}

// Close ends the work under way, refuses work from now on, and returns
// once the work under way has returned.
func (g *Group) Close() {
	g.stop()
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}
