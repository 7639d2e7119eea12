package lifetime

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

type countCoalesced struct{ n atomic.Int32 }

func (c *countCoalesced) Coalesced(string) { c.n.Add(1) }

// heldWork is work that counts its runs and answers "done" once release
// is closed, or its context's error when that ends first.
func heldWork(release <-chan struct{}, runs *atomic.Int32) func(context.Context) (any, error) {
	return func(ctx context.Context) (any, error) {
		runs.Add(1)
		select {
		case <-release:
			return "done", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// waitingCtx is a caller's context that says on waiting when the caller
// asks for its Done: Coalesce does so once it joined the work, to wait.
type waitingCtx struct {
	context.Context
	waiting chan<- struct{}
}

func (c waitingCtx) Done() <-chan struct{} {
	select {
	case c.waiting <- struct{}{}:
	default:
	}
	return c.Context.Done()
}

// Concurrent callers of one key share one run of fn, which goes on when
// its first caller goes away; the callers that joined are counted.
func TestCoalesceRunsOnceForAll(t *testing.T) {
	met := &countCoalesced{}
	l := New(time.Minute, met, nil)
	release := make(chan struct{})
	var runs atomic.Int32
	fn := heldWork(release, &runs)
	first, cancel := context.WithCancel(t.Context())
	firstDone := make(chan error, 1)
	go func() {
		_, err := l.Coalesce(first, "k", "key", fn)
		firstDone <- err
	}()
	for runs.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-firstDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that went away: %v, want context.Canceled", err)
	}
	var wg sync.WaitGroup
	results := make(chan any, 3)
	joined := make(chan struct{}, 3)
	for range 3 {
		wg.Go(func() {
			v, err := l.Coalesce(waitingCtx{t.Context(), joined}, "k", "key", fn)
			if err != nil {
				t.Errorf("Coalesce: %v", err)
			}
			results <- v
		})
	}
	for range 3 { // the work ends only once all three wait for it
		select {
		case <-joined:
		case <-time.After(time.Minute):
			close(release)
			t.Fatal("the callers did not wait for the work under way within a minute")
		}
	}
	close(release)
	wg.Wait()
	close(results)
	for v := range results {
		if v != "done" {
			t.Errorf("result %v, want done", v)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("fn ran %d times, want 1", n)
	}
	if n := met.n.Load(); n != 3 {
		t.Errorf("coalesced %d, want 3", n)
	}
}

// A caller that joined work under way is counted as coalesced whether it
// waits for the result or stops waiting first (its context ends, or its
// wait for a stale answer runs out): it started no fetch of its own. The
// caller that started the work is not counted, whichever way it ends.
func TestCoalescedCountedWhenTheJoinerStopsWaiting(t *testing.T) {
	met := &countCoalesced{}
	l := New(time.Minute, met, nil)
	release := make(chan struct{})
	var runs atomic.Int32
	fn := heldWork(release, &runs)
	leaderDone := make(chan error, 1)
	go func() {
		_, err := l.CoalesceWithin(t.Context(), 10*time.Millisecond, "k", "key", fn)
		leaderDone <- err
	}()
	for runs.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := <-leaderDone; !errors.Is(err, ErrStillWaiting) {
		t.Fatalf("the caller that started the work: %v, want ErrStillWaiting", err)
	}
	if _, err := l.CoalesceWithin(t.Context(), 10*time.Millisecond, "k", "key", fn); !errors.Is(err, ErrStillWaiting) {
		t.Fatalf("a caller whose wait ran out: %v, want ErrStillWaiting", err)
	}
	gone, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if _, err := l.Coalesce(gone, "k", "key", fn); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a caller whose context ended: %v", err)
	}
	close(release)
	if v, err := l.Coalesce(t.Context(), "k", "key2", func(context.Context) (any, error) { return "alone", nil }); v != "alone" || err != nil {
		t.Fatalf("a caller alone: %v, %v", v, err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("fn ran %d times, want 1", n)
	}
	if n := met.n.Load(); n != 2 {
		t.Errorf("coalesced %d, want 2 (the two callers that joined and stopped waiting)", n)
	}
}

// Once stopped, no work is taken; Wait waits for the work under way, and
// Cancel ends its contexts.
func TestStopWaitCancel(t *testing.T) {
	l := New(time.Minute, nil, nil)
	ctx, done, err := l.Detached(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	l.Stop()
	if l.StartWork() {
		t.Error("StartWork after Stop took work")
	}
	if _, _, err := l.Detached(time.Hour); !errors.Is(err, records.ErrShutDown) {
		t.Errorf("Detached after Stop: %v, want records.ErrShutDown", err)
	}
	if _, err := l.Coalesce(t.Context(), "k", "other", func(context.Context) (any, error) { return nil, nil }); !errors.Is(err, records.ErrShutDown) {
		t.Errorf("Coalesce after Stop: %v, want records.ErrShutDown", err)
	}
	short, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if err := l.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait with work under way: %v, want context.DeadlineExceeded", err)
	}
	l.Cancel()
	<-ctx.Done()
	done()
	if err := l.Wait(t.Context()); err != nil {
		t.Errorf("Wait once the work ended: %v", err)
	}
}

type nopNotifier struct{ noNotifier }

func TestOneNotifier(t *testing.T) {
	l := New(time.Minute, nil, nil)
	if _, ok := l.Notifier().(noNotifier); !ok {
		t.Errorf("Notifier before SetNotifier: %T, want one doing nothing", l.Notifier())
	}
	if err := l.SetNotifier(nil); err == nil {
		t.Error("SetNotifier(nil) succeeded")
	}
	n := &nopNotifier{}
	if err := l.SetNotifier(n); err != nil {
		t.Fatal(err)
	}
	if err := l.SetNotifier(&nopNotifier{}); err == nil {
		t.Error("a second Notifier was taken")
	}
	if l.Notifier() != Notifier(n) {
		t.Error("Notifier is not the one set")
	}
}

// Work asked for is waited for from the ask on, also by a caller that
// stops waiting before the goroutine running it began: Wait does not find
// the lifetime idle while a refresh a caller left to go on is still to
// start (a test rig's WaitIdle returned, and the refresh ran after it).
func TestWaitCountsWorkNotYetBegun(t *testing.T) {
	l := New(time.Minute, nil, nil)
	release := make(chan struct{})
	var runs atomic.Int32
	fn := heldWork(release, &runs)
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	for i := range 100 {
		key := fmt.Sprint("k", i)
		if _, err := l.CoalesceWithin(gone, time.Nanosecond, "k", key, fn); err == nil {
			t.Fatal("a caller that went away got the work's result")
		}
		if err := l.Wait(gone); err == nil {
			t.Fatalf("Wait found the lifetime idle with work %d asked for and not ended (%d of the works began)", i, runs.Load())
		}
	}
	close(release)
	if err := l.Wait(t.Context()); err != nil {
		t.Errorf("Wait once the work ended: %v", err)
	}
	if n := runs.Load(); n != 100 {
		t.Errorf("%d works ran, want 100", n)
	}
}

// WriteInTurn returns write's error when write ran, and why it did not
// run otherwise: never a caller's context that ended while write ran, or
// before its turn came, with write then run anyway. An import cut off
// then (its client gone, the shutdown's deadline) ended, let go of the
// import lock and told retention so, while its record was still to be
// written.
func TestWriteInTurnOutcomeIsTheWrites(t *testing.T) {
	t.Run("ends while write runs", func(t *testing.T) {
		l := New(time.Minute, nil, nil)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		started, proceed := make(chan struct{}), make(chan struct{})
		var wrote atomic.Bool
		res := make(chan error, 1)
		go func() {
			res <- l.WriteInTurn(ctx, "versions", "k", func(context.Context) error {
				close(started)
				<-proceed
				wrote.Store(true)
				return nil
			})
		}()
		<-started
		cancel()
		// Whether WriteInTurn returned already or still waits, the write
		// goes on to its end.
		select {
		case err := <-res:
			close(proceed)
			t.Fatalf("WriteInTurn returned %v while its write ran (then wrote: %v)", err, waitWrote(l, &wrote))
		case <-time.After(50 * time.Millisecond):
		}
		close(proceed)
		if err := <-res; err != nil || !wrote.Load() {
			t.Errorf("WriteInTurn: %v, wrote %v; want nil once its write succeeded", err, wrote.Load())
		}
	})
	t.Run("ends before its turn", func(t *testing.T) {
		l := New(time.Minute, nil, nil)
		gone, cancel := context.WithCancel(t.Context())
		cancel()
		for i := range 50 {
			var wrote atomic.Bool
			err := l.WriteInTurn(gone, "versions", fmt.Sprint("k", i), func(context.Context) error {
				wrote.Store(true)
				return nil
			})
			if w := waitWrote(l, &wrote); (err == nil) != w {
				t.Fatalf("WriteInTurn: %v, and its write ran: %v", err, w)
			}
		}
	})
}

// waitWrote waits for the work of l under way to end, and says whether
// a write ran.
func waitWrote(l *Lifetime, wrote *atomic.Bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l.Wait(ctx)
	return wrote.Load()
}

// Wait on a lifetime with no work under way says so, also once ctx is
// done: the engine's shutdown, its deadline passed (requests cut off
// there, their archives closed since), logged that archive downloads
// still running at the deadline were cancelled, when none was, every
// other time.
func TestWaitIdleOnceCtxDone(t *testing.T) {
	l := New(time.Minute, nil, nil)
	done, cancel := context.WithCancel(t.Context())
	cancel()
	for i := range 64 {
		if err := l.Wait(done); err != nil {
			t.Fatalf("Wait %d with no work under way: %v", i, err)
		}
	}
	if !l.StartWork() {
		t.Fatal("StartWork refused")
	}
	if err := l.Wait(done); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with work under way: %v, want context.Canceled", err)
	}
	l.EndWork()
	if err := l.Wait(done); err != nil {
		t.Errorf("Wait once the work ended: %v", err)
	}
}

// Callers that stop waiting for work under way leave nothing behind
// them: a client asking in a loop for what a slow origin is still to
// answer, and going away each time, does not pile up a goroutine (and a
// channel) a request until the work ends.
func TestCallersGoneLeaveNothingBehind(t *testing.T) {
	l := New(time.Minute, nil, nil)
	release := make(chan struct{})
	var runs atomic.Int32
	fn := heldWork(release, &runs)
	if _, err := l.CoalesceWithin(t.Context(), time.Nanosecond, "k", "key", fn); !errors.Is(err, ErrStillWaiting) {
		t.Fatalf("the caller that started the work: %v, want ErrStillWaiting", err)
	}
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	before := runtime.NumGoroutine()
	const callers = 2000
	for range callers {
		if _, err := l.Coalesce(gone, "k", "key", fn); !errors.Is(err, context.Canceled) {
			t.Fatalf("a caller gone: %v, want context.Canceled", err)
		}
	}
	grown := runtime.NumGoroutine() - before
	close(release)
	if err := l.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if grown > callers/20 {
		t.Errorf("%d callers gone left %d goroutines behind while the work ran, want none", callers, grown)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("fn ran %d times, want 1", n)
	}
}
