package lifetime

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestAbandonedWorkBounded: a coalesced work whose every caller left
// goes on (for the next caller, and the cache) while fewer than
// MaxAbandoned do; past that, the next one left ends as its last caller
// leaves, and a caller asking for its key again starts it anew. A caller
// joining an abandoned work takes it off the count, so that another may
// go on in its place.
func TestAbandonedWorkBounded(t *testing.T) {
	l := New(time.Minute, nil, nil)
	release := make(chan struct{})
	ended := make(chan string, 2*MaxAbandoned)
	work := func(key string) func(context.Context) (any, error) {
		return func(ctx context.Context) (any, error) {
			select {
			case <-release:
				return key, nil
			case <-ctx.Done():
				ended <- key
				return nil, ctx.Err()
			}
		}
	}
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	leaveWork := func(key string) {
		if _, err := l.Coalesce(gone, "k", key, work(key)); err == nil {
			t.Fatalf("%s: a caller gone got an answer", key)
		}
	}
	for i := range MaxAbandoned {
		leaveWork(fmt.Sprint("kept-", i))
	}
	leaveWork("ended")
	select {
	case key := <-ended:
		if key != "ended" {
			t.Fatalf("%s ended, want the work left past the bound", key)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the work left past the bound goes on")
	}
	// A caller joining a work abandoned takes it off the count: the next
	// one left goes on.
	joined := make(chan any, 1)
	go func() {
		v, _ := l.Coalesce(t.Context(), "k", "kept-0", work("kept-0"))
		joined <- v
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		l.flightsMu.Lock()
		f := l.flights["kept-0"]
		rejoined := f != nil && f.waiters > 0
		l.flightsMu.Unlock()
		if rejoined {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the caller did not join the work abandoned")
		}
	}
	leaveWork("kept-after-join")
	select {
	case key := <-ended:
		t.Fatalf("%s ended, within the bound", key)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if v := <-joined; v != "kept-0" {
		t.Errorf("the caller that joined got %v, want the work's answer", v)
	}
	if err := l.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
}
