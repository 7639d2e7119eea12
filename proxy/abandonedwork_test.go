package proxy

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/observed"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
)

// TestAbandonedOriginWorkBounded: a client that asks for names never
// asked before and goes away at once (each request its connection's
// last) leaves the mirror at most lifetime.MaxAbandoned origin fetches
// under way that no one waits for, whatever the number of its requests:
// each further one's fetch ends with its last caller, where every one
// went on for the origin timeout (two minutes), a stranger's loop of
// requests holding thousands of goroutines and origin requests.
func TestAbandonedOriginWorkBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	handler := Instrument(h.server, slog.New(&observed.Logs{}), nil)
	// The origin's services discovered, then its answers long after the
	// client gave up.
	if code := observed.AskGone(handler, []string{"/" + originHost + "/made-up/warm/index.json"})[0]; code == 0 {
		t.Fatal("no answer")
	}
	for warm := time.Now().Add(10 * time.Second); h.origin.Hits(fakeorigin.Versions) == 0 || h.origin.Delayed() != 0; {
		if time.Now().After(warm) {
			t.Fatal("the origin was not asked for the first name's versions")
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.origin.SetLatency(time.Minute)
	t.Cleanup(h.origin.Close) // before the harness stops: the origin's requests end
	const requests = 5000
	paths := make([]string, requests)
	for i := range paths {
		paths[i] = fmt.Sprintf("/%s/made-up/type-%d/index.json", originHost, i)
	}
	observed.AskGone(handler, paths)
	// The fetches kept run on; those ended let their origin requests go.
	deadline := time.Now().Add(10 * time.Second)
	for {
		open := h.origin.Delayed()
		if open <= lifetime.MaxAbandoned {
			t.Logf("%d origin requests sent, %d still open", h.origin.Hits(fakeorigin.Versions), open)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d origin requests still open for %d requests of clients gone, want at most %d", open, requests, lifetime.MaxAbandoned)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
