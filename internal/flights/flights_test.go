package flights

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
	"github.com/tfmirror/tfmirror/v2/internal/workgroup"
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
	g := New(slog.New(slog.DiscardHandler))
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
	g := New(slog.New(slog.DiscardHandler))
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

// Work that panics (a bug of the mirror's, met on an origin's answer)
// fails for its callers with workgroup.ErrPanicked (all of them: they
// share its one outcome): it does not end the process. The panic is logged once, at error, with its
// stack and key; the key is free for the next work, and Close does not
// wait for the work that panicked.
func TestWorkThatPanicsFailsItsCallers(t *testing.T) {
	var logged logbuf.Buffer
	g := New(slog.New(slog.NewTextHandler(&logged, nil)))
	v, err := g.Do(t.Context(), "k", func(context.Context) (any, error) {
		var m map[string]int
		m["the origin's answer"]++ // assignment to entry in nil map
		return nil, nil
	})
	if !errors.Is(err, workgroup.ErrPanicked) {
		t.Errorf("the caller of work that panicked got %v, %v; want workgroup.ErrPanicked", v, err)
	}
	out := logged.String()
	if n := strings.Count(out, "panicked"); n != 1 {
		t.Errorf("the panic is logged %d times, want once:\n%s", n, out)
	}
	for _, want := range []string{"level=ERROR", "key=k", "nil map", "flights_test.go"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log does not say %q:\n%s", want, out)
		}
	}
	v, err = g.Do(t.Context(), "k", func(context.Context) (any, error) { return "again", nil })
	if v != "again" || err != nil {
		t.Errorf("the key asked again: %v, %v", v, err)
	}
	closed := make(chan struct{})
	go func() { g.Close(); close(closed) }()
	within(t, closed, "Close")
}
