// Package workgroup runs the goroutines of one step of work and waits for
// them, as golang.org/x/sync/errgroup does (which it uses), with one
// difference a server needs: a panic on one of them (a bug of the
// mirror's, on a goroutine that no handler's recovery reaches) is the
// group's error, not the end of the process. The step fails for the
// requests that wait for it, as a request whose handler panicked does;
// the process serves the others.
//
// It also holds the one error, ErrPanicked, and the one log line,
// Panicked, of a panic recovered on any goroutine the mirror starts for
// its callers (its coalesced work, an archive's download, a group's):
// callers tell such a failure apart from the origin's or the cache's with
// errors.Is(err, ErrPanicked), and it is logged once, where it was
// recovered, with its stack.
//
// The production code of the module starts an errgroup through this
// package only, and hands singleflight's DoChan (which runs its function
// on a goroutine of its own, where a panic ends the process) a function
// made by Guarded only; the engine's packages (mirror/...) start no
// goroutine but through Go or a Group
// (internal/layercheck.TestGoroutinesGuarded).
package workgroup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"

	"golang.org/x/sync/errgroup"
)

// ErrPanicked is the error of work run apart from its callers that
// panicked: a bug of the mirror's, logged with its stack (Panicked).
var ErrPanicked = errors.New("the mirror's work for this request failed on a bug of the mirror's (a panic, logged with its stack)")

// Panicked logs p, the value recovered from a panic of work run apart
// from its callers, to log at error with the stack and args, and returns
// the error the work's callers are given: ErrPanicked, saying p. Call it
// from the deferred function that recovered p, for the stack logged to
// be the panic's.
func Panicked(log *slog.Logger, p any, args ...any) error {
	logPanic(log, "the mirror's work for a request panicked (a bug of the mirror's); its callers fail", p, args)
	return fmt.Errorf("%w: %v", ErrPanicked, p)
}

// logPanic logs msg at error with args, the panic p and the stack; call
// it from the deferred function that recovered p.
func logPanic(log *slog.Logger, msg string, p any, args []any) {
	log.Error(msg, slices.Concat(args, []any{"panic", fmt.Sprint(p), "stack", string(debug.Stack())})...)
}

// Guarded returns f made safe to run on a goroutine that no handler's
// recovery reaches (singleflight's DoChan, work detached from its
// callers): it returns what f returns, or, when f panics, the zero value
// and ErrPanicked, logged to log with args by Panicked.
func Guarded[T any](log *slog.Logger, f func() (T, error), args ...any) func() (T, error) {
	return func() (v T, err error) {
		defer func() {
			if p := recover(); p != nil {
				var zero T
				v, err = zero, Panicked(log, p, args...)
			}
		}()
		return f()
	}
}

// Go runs f on a goroutine of its own, as a go statement does, but for
// a panic of f: logged to log at error with args, the panic and its
// stack ("a goroutine of the mirror's panicked"), it ends that goroutine
// alone, not the process. The caller owns the goroutine, as
// the one of a go statement: f must end when its owner says so.
func Go(log *slog.Logger, f func(), args ...any) {
	go func() {
		defer func() {
			if p := recover(); p != nil {
				logPanic(log, "a goroutine of the mirror's panicked (a bug of the mirror's); it ended, the process serves on", p, args)
			}
		}()
		f()
	}()
}

// A Group is a set of goroutines working on parts of one step, made by
// New or WithContext. Its methods are errgroup.Group's; it is not to be
// copied after first use.
type Group struct {
	g    *errgroup.Group
	log  *slog.Logger
	args []any
}

// New returns a group that logs a panic of its goroutines to log, with
// args (key-value pairs saying what the step was), as Panicked does.
// Its goroutines are not cancelled when one fails: see WithContext.
func New(log *slog.Logger, args ...any) *Group {
	return &Group{g: new(errgroup.Group), log: log, args: args}
}

// WithContext returns a group as New does, and a context derived from
// ctx that is cancelled when a goroutine of the group returns an error
// or panics, or when Wait returns, whichever comes first.
func WithContext(ctx context.Context, log *slog.Logger, args ...any) (*Group, context.Context) {
	g, gctx := errgroup.WithContext(ctx)
	return &Group{g: g, log: log, args: args}, gctx
}

// SetLimit limits the number of the group's goroutines running at once
// to n (negative: no limit), as errgroup.Group.SetLimit does: Go then
// blocks until one can start. It must not be called while any runs.
func (g *Group) SetLimit(n int) { g.g.SetLimit(n) }

// Go calls f on a new goroutine of the group. The first error a
// goroutine returns, or ErrPanicked for one that panicked (logged with
// the panic's stack), is what Wait returns; the goroutine that panicked
// ends there, and the others run on (WithContext's context tells them
// to stop).
func (g *Group) Go(f func() error) {
	g.g.Go(func() error {
		_, err := Guarded(g.log, func() (struct{}, error) { return struct{}{}, f() }, g.args...)()
		return err
	})
}

// Wait waits for every goroutine the group started to return, then
// returns the first error of theirs (ErrPanicked for a panic), or nil.
func (g *Group) Wait() error { return g.g.Wait() }

// Wait returns nil once done is closed, or ctx's error if ctx ends
// first. A done already closed wins, whatever ctx: of two cases ready at
// once a select picks either, and work that had already ended would be
// waited for in vain every other time.
func Wait(ctx context.Context, done <-chan struct{}) error {
	select {
	case <-done:
		return nil
	default:
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
