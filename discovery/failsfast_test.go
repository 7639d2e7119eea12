package discovery

import (
	"testing"
	"time"
)

// A circuit fails requests fast while it is open and while its probe is
// under way; once its cooldown has passed with no request since, it does
// not (the next request is the probe), though nothing told it so: what
// reads Circuit at any time (tfmirror_origin_circuit_open) sees it.
func TestCircuitFailsFast(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	b := &breaker{threshold: 1, cooldown: time.Minute, now: clock.Now, hosts: map[string]*circuit{}}
	const host = "registry.example"
	check := func(when string, state string, failsFast bool) {
		t.Helper()
		c := b.snapshot(host)
		if c.State != state || c.FailsFast() != failsFast {
			t.Fatalf("%s: %+v FailsFast=%v, want %s FailsFast=%v", when, c, c.FailsFast(), state, failsFast)
		}
	}
	check("before any request", "closed", false)
	b.record(host, false, attemptFailed)
	check("opened", "open", true)
	clock.Advance(time.Minute)
	check("cooldown passed, no request", "half-open", false)
	probe, err := b.allow(host)
	if !probe || err != nil {
		t.Fatalf("after the cooldown: allow = %v, %v, want the probe", probe, err)
	}
	check("probe under way", "half-open", true)
	if _, err := b.allow(host); err == nil {
		t.Fatal("a second request went through while the probe is under way")
	}
	b.record(host, true, attemptFailed)
	check("probe failed", "open", true)
	clock.Advance(time.Minute)
	probe, _ = b.allow(host)
	b.record(host, probe, attemptOK)
	check("probe succeeded", "closed", false)
}
