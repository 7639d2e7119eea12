package lifetime

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/workgroup"
)

// Work coalesced for the callers of a key that panics (a bug of the
// mirror's, met on an origin's answer) fails for those callers, as a
// handler's panic fails its request: it does not end the process, which
// serves every other client. The panic is logged at error with its
// stack, the key is free for the next work, and the lifetime counts the
// work as ended (a shutdown does not wait for it).
func TestCoalescedWorkThatPanicsFailsItsCallers(t *testing.T) {
	var logged bytes.Buffer
	l := New(time.Minute, nil, slog.New(slog.NewTextHandler(&logged, nil)))
	_, err := l.Coalesce(t.Context(), "k", "key", func(context.Context) (any, error) {
		var m map[string]int
		m["a version the origin listed"]++ // assignment to entry in nil map
		return nil, nil
	})
	if !errors.Is(err, workgroup.ErrPanicked) {
		t.Fatalf("Coalesce of work that panicked: %v, want workgroup.ErrPanicked", err)
	}
	if !strings.Contains(err.Error(), "nil map") {
		t.Errorf("the error does not say what the panic was: %v", err)
	}
	out := logged.String()
	for _, want := range []string{"level=ERROR", "nil map", "key=key", "panic_test.go"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log does not say %q:\n%s", want, out)
		}
	}
	var runs atomic.Int32
	v, err := l.Coalesce(t.Context(), "k", "key", func(context.Context) (any, error) {
		runs.Add(1)
		return "fetched", nil
	})
	if err != nil || v != "fetched" || runs.Load() != 1 {
		t.Errorf("the next work of the key: %v, %v (ran %d times), want fetched once", v, err, runs.Load())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := l.Wait(ctx); err != nil {
		t.Errorf("work that panicked is still counted: %v", err)
	}
}

// A write in turn with a record's fetches (an import's) that panics is
// told so: its writer does not go on as if the record were written.
func TestWriteInTurnThatPanicsFails(t *testing.T) {
	l := New(time.Minute, nil, nil)
	err := l.WriteInTurn(t.Context(), "k", "key", func(context.Context) error {
		panic("a bug of the write's")
	})
	if !errors.Is(err, workgroup.ErrPanicked) {
		t.Fatalf("WriteInTurn of a write that panicked: %v, want workgroup.ErrPanicked", err)
	}
}
