package main

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// An origin's circuit breaker whose cooldown passed on an idle mirror
// lets the next request through (half-open): tfmirror_origin_circuit_open
// says so at the next scrape, without a request to tell it, instead of
// reading 1 until one comes (an alert firing for an origin nothing fails
// fast). A probe that fails opens the circuit again, and the gauge
// reads 1.
func TestCircuitGaugeAfterCooldownOnAnIdleMirror(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{})
	origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	// The origin client's clock, moved on by the test.
	var skew atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	const cooldown = time.Minute
	tm := startMirrorWith(t, origin, t.TempDir(), nil, &overrides{
		dialContext: routeRegistryTo(origin),
		origin: func(c *discovery.Config) {
			fastRetries(c)
			c.Now = now
			c.BreakerCooldown = cooldown
		},
	}, "--allow-private-origins", "--versions-ttl", "1ns")
	reg := tm.m.registry
	index := tfRegistry + "/hashicorp/random/index.json"
	if resp, body, err := tm.get(index); err != nil || resp.StatusCode != 200 {
		t.Fatalf("warming: %v %v %s", resp, err, body)
	}
	origin.SetKindStatus(fakeorigin.Versions, http.StatusInternalServerError)
	// Three attempts a request: the second opens the circuit (threshold 5).
	for range 2 {
		if resp, body, err := tm.get(index); err != nil || resp.StatusCode != 200 {
			t.Fatalf("stale index.json: %v %v %s", resp, err, body)
		}
	}
	if got := metric(t, reg, "tfmirror_origin_circuit_open", "origin", tfRegistry); got != 1 {
		t.Fatalf("after five failures: tfmirror_origin_circuit_open = %v, want 1", got)
	}

	skew.Add(int64(cooldown + time.Second))
	hits := origin.TotalHits()
	if c := tm.m.origin.Circuit(tfRegistry); c.State != "half-open" {
		t.Fatalf("breaker after its cooldown: %+v, want half-open", c)
	}
	if got := metric(t, reg, "tfmirror_origin_circuit_open", "origin", tfRegistry); got != 0 {
		t.Errorf("cooldown passed, no request since: tfmirror_origin_circuit_open = %v, want 0 (the breaker is half-open: the next request goes to the origin)", got)
	}
	if got := origin.TotalHits(); got != hits {
		t.Errorf("the scrape sent %d requests to the origin", got-hits)
	}

	// The probe fails: open again for another cooldown.
	if resp, body, err := tm.get(index); err != nil || resp.StatusCode != 200 {
		t.Fatalf("stale index.json after the cooldown: %v %v %s", resp, err, body)
	}
	if got := origin.TotalHits(); got != hits+1 {
		t.Fatalf("origin saw %d requests after the cooldown, want 1 (the probe)", got-hits)
	}
	if got := metric(t, reg, "tfmirror_origin_circuit_open", "origin", tfRegistry); got != 1 {
		t.Errorf("after the failed probe: tfmirror_origin_circuit_open = %v, want 1", got)
	}
}
