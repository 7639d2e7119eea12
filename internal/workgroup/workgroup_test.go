package workgroup

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
)

// nilMapWrite panics as a bug met on an origin's answer would: an
// assignment to an entry in a nil map.
func nilMapWrite() error {
	var m map[string]int
	m["a platform of the version"]++
	return nil
}

// A goroutine of a group that panics (a bug of the mirror's, where no
// handler's recovery reaches) does not end the process: Wait returns
// ErrPanicked saying the panic, logged once at error with the stack of
// the goroutine that panicked and what the step was; the group's
// context is cancelled, so the goroutines beside it stop.
func TestPanicIsTheGroupsError(t *testing.T) {
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	g, gctx := WithContext(t.Context(), log, "step", "platforms")
	stopped := make(chan error, 1)
	g.Go(func() error {
		<-gctx.Done()
		stopped <- gctx.Err()
		return nil
	})
	g.Go(nilMapWrite)
	err := g.Wait()
	if !errors.Is(err, ErrPanicked) {
		t.Fatalf("Wait of a group whose goroutine panicked: %v, want ErrPanicked", err)
	}
	if !strings.Contains(err.Error(), "nil map") {
		t.Errorf("the error does not say what panicked: %v", err)
	}
	if err := <-stopped; !errors.Is(err, context.Canceled) {
		t.Errorf("the goroutine beside the one that panicked saw %v, want its context cancelled", err)
	}
	out := logged.String()
	if n := strings.Count(out, "panicked"); n != 1 {
		t.Errorf("the panic is logged %d times, want once:\n%s", n, out)
	}
	for _, want := range []string{"level=ERROR", "step=platforms", "nil map", "nilMapWrite", "workgroup_test.go"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log does not say %q:\n%s", want, out)
		}
	}
}

// A group's goroutines that return errors are an errgroup's: the first
// error is Wait's, and a group without a context lets the others run to
// their end.
func TestFirstErrorIsWaits(t *testing.T) {
	g := New(slog.New(slog.DiscardHandler))
	first := errors.New("the origin answered 503")
	var ran atomic.Int32
	release := make(chan struct{})
	g.Go(func() error { ran.Add(1); return first })
	g.Go(func() error { <-release; ran.Add(1); return errors.New("a later failure") })
	time.AfterFunc(10*time.Millisecond, func() { close(release) })
	if err := g.Wait(); err != first {
		t.Fatalf("Wait: %v, want the first error", err)
	}
	if n := ran.Load(); n != 2 {
		t.Errorf("%d goroutines ran to their end, want 2", n)
	}
	if err := New(slog.New(slog.DiscardHandler)).Wait(); err != nil {
		t.Errorf("Wait of an empty group: %v", err)
	}
}

// SetLimit bounds the goroutines running at once, panicking ones
// included: a panic frees its goroutine's place.
func TestLimitHoldsThroughPanics(t *testing.T) {
	const limit, n = 3, 24
	g := New(slog.New(slog.DiscardHandler))
	g.SetLimit(limit)
	var mu sync.Mutex
	running, most := 0, 0
	for i := range n {
		g.Go(func() error {
			mu.Lock()
			running++
			most = max(most, running)
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			running--
			mu.Unlock()
			if i%2 == 0 {
				return nilMapWrite()
			}
			return nil
		})
	}
	if err := g.Wait(); !errors.Is(err, ErrPanicked) {
		t.Fatalf("Wait: %v, want ErrPanicked", err)
	}
	if most > limit || most == 0 {
		t.Errorf("%d goroutines ran at once, want 1 to %d", most, limit)
	}
}

// A goroutine started by Go that panics ends alone, its deferred calls
// run (its owner learns that it ended), the panic logged with what the
// goroutine was for; the process goes on.
func TestGoPanicEndsTheGoroutineAlone(t *testing.T) {
	var logged logbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	done := make(chan struct{})
	Go(log, func() {
		defer close(done)
		_ = nilMapWrite()
	}, "work", "cache check")
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the goroutine that panicked did not end")
	}
	// The log line is written after the deferred calls of f ran.
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(logged.String(), "panicked") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	out := logged.String()
	for _, want := range []string{"level=ERROR", "goroutine of the mirror's panicked", "work=\"cache check\"", "nil map", "workgroup_test.go"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log does not say %q:\n%s", want, out)
		}
	}
}

// TestWaitDoneFirst: Wait returns nil for work already done even when
// ctx has ended too (every time, not every other), ctx's error when it
// ends first, and nil once the work is done.
func TestWaitDoneFirst(t *testing.T) {
	done := make(chan struct{})
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Wait(ended, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("work not done, ctx ended: %v, want context.Canceled", err)
	}
	close(done)
	for i := range 100 {
		if err := Wait(ended, done); err != nil {
			t.Fatalf("work done, ctx ended too (try %d): %v, want nil", i, err)
		}
	}
	later := make(chan struct{})
	time.AfterFunc(10*time.Millisecond, func() { close(later) })
	if err := Wait(context.Background(), later); err != nil {
		t.Fatalf("work done later: %v", err)
	}
}
