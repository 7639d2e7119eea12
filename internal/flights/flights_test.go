package flights

import (
	"context"
	"errors"
	"testing"
	"time"
)

// within waits for ch, failing the test after a minute (an answer comes
// in milliseconds unless the machine is loaded).
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("%s: no answer within a minute", what)
		panic("unreachable")
	}
}

type result struct {
	v   any
	err error
}

// A caller that leaves gets its own context's error at once, and the
// work goes on, on a context that keeps the caller's values and that the
// caller's leaving did not end.
func TestDoOutlivesTheCallerLeaving(t *testing.T) {
	g := New()
	defer g.Close()
	type key struct{}
	entered, proceed := make(chan struct{}), make(chan struct{})
	ran := make(chan result, 1)
	fn := func(ctx context.Context) (any, error) {
		close(entered)
		<-proceed
		ran <- result{ctx.Value(key{}), ctx.Err()}
		return nil, nil
	}
	leaving, leave := context.WithCancel(context.WithValue(context.Background(), key{}, "first"))
	first := make(chan result, 1)
	go func() { v, err := g.Do(leaving, "k", fn); first <- result{v, err} }()
	<-entered
	leave()
	if r := within(t, first, "the caller that left"); !errors.Is(r.err, context.Canceled) {
		t.Errorf("the caller that left: %v, %v; want context.Canceled", r.v, r.err)
	}
	close(proceed)
	if r := within(t, ran, "the work"); r.err != nil || r.v != "first" {
		t.Errorf("the work after its caller left: value %v, context %v; want the caller's value and a live context", r.v, r.err)
	}
}

// Close ends the work under way and returns only once it has returned;
// the caller waiting for it, and one asking afterwards, get ErrClosed.
func TestCloseEndsWaitsAndRefuses(t *testing.T) {
	g := New()
	entered, returned := make(chan struct{}), make(chan struct{})
	waiting := make(chan result, 1)
	go func() {
		v, err := g.Do(context.Background(), "k", func(ctx context.Context) (any, error) {
			close(entered)
			<-ctx.Done()
			time.Sleep(50 * time.Millisecond) // still returning when Close is called
			close(returned)
			return nil, ctx.Err()
		})
		waiting <- result{v, err}
	}()
	<-entered
	closed := make(chan struct{})
	go func() { g.Close(); close(closed) }()
	within(t, closed, "Close")
	select {
	case <-returned:
	default:
		t.Error("Close returned before the work under way")
	}
	if r := within(t, waiting, "the waiting caller"); !errors.Is(r.err, ErrClosed) {
		t.Errorf("the caller waiting when Close ended the work: %v; want ErrClosed", r.err)
	}
	ran := false
	if _, err := g.Do(context.Background(), "k", func(context.Context) (any, error) { ran = true; return nil, nil }); !errors.Is(err, ErrClosed) || ran {
		t.Errorf("work asked for after Close: %v, ran %v; want ErrClosed, not run", err, ran)
	}
}
