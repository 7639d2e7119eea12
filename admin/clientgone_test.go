package admin

import (
	"context"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// A sync that goes away (interrupted, its process killed) while the
// mirror fetches what it asked for is not a failed package in the
// sync's metrics, on which an operator may alert: the fetch goes on and
// is cached for the sync run next. The package is counted when it is
// asked again.
func TestSyncGoneIsNotAFailure(t *testing.T) {
	h := newHarness(t, harnessOptions{origin: fakeorigin.Options{}})
	h.origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	met := &countingSync{outcomes: map[string]int{}}
	a := h.newAPI(t, nil, met, Options{})
	p := addrs.Provider{Hostname: originHost, Namespace: "hashicorp", Type: "random"}
	// The origin answers much later than the sync goes away (at once).
	h.origin.SetLatency(time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.Ensure(ctx, p, "3.6.0", "linux_amd64"); err == nil {
		t.Fatal("Ensure for a caller gone succeeded")
	}
	if n := met.outcomes["failed"]; n != 0 {
		t.Errorf("a package whose sync went away counted %d times as failed, want 0", n)
	}
	h.origin.SetLatency(0)
	if _, err := a.Ensure(context.Background(), p, "3.6.0", "linux_amd64"); err != nil {
		t.Fatal(err)
	}
	if got := met.outcomes["fetched"] + met.outcomes["cached"]; got != 1 || met.outcomes["failed"] != 0 {
		t.Errorf("sync metrics = %v, want the package counted once, fetched or cached", met.outcomes)
	}
}
