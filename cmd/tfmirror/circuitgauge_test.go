package main

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"path/filepath"
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

// The same for the shared store: a store that failed at start-up opens
// its breaker, and once the cooldown has passed on an idle replica
// tfmirror_shared_store_down reads 0 (the next call tries the store, as
// /readyz says), without a call to tell it.
func TestSharedStoreDownAfterCooldownOnAnIdleMirror(t *testing.T) {
	// Credentials of the environment's, so that the SDK asks no
	// metadata service for some.
	t.Setenv("AWS_ACCESS_KEY_ID", "tfmirror-test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "tfmirror-test-secret")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	origin := newOrigin(t, fakeorigin.Options{})
	// A loopback port nothing listens on: every call fails at once.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + ln.Addr().String()
	ln.Close()
	key := filepath.Join(t.TempDir(), "shared.key")
	if err := os.WriteFile(key, bytes.Repeat([]byte("k"), 32), 0o600); err != nil {
		t.Fatal(err)
	}
	const cooldown = 2 * time.Second
	tm := startMirrorWith(t, origin, t.TempDir(), nil, &overrides{dialContext: routeRegistryTo(origin)},
		"--allow-private-origins",
		"--shared-store", "s3://bucket/prefix?endpoint="+endpoint+"&region=x&path_style=true", "--shared-store-key-file", key,
		"--shared-store-breaker-threshold", "1", "--shared-store-breaker-cooldown", cooldown.String())
	reg := tm.m.registry
	deadline := time.Now().Add(30 * time.Second)
	for tm.m.shared.Status() == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // the start-up check, failing
	}
	opened := time.Now()
	if tm.m.shared.Status() == nil {
		t.Fatal("the shared store's breaker did not open after the start-up check failed")
	}
	if got := metric(t, reg, "tfmirror_shared_store_down"); got != 1 && time.Since(opened) < cooldown {
		t.Fatalf("breaker open: tfmirror_shared_store_down = %v, want 1", got)
	}
	for tm.m.shared.Status() != nil && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if tm.m.shared.Status() != nil {
		t.Fatal("the shared store's breaker did not let a call through after its cooldown")
	}
	if got := metric(t, reg, "tfmirror_shared_store_down"); got != 0 {
		t.Errorf("cooldown passed, no call since: tfmirror_shared_store_down = %v, want 0 (the next call tries the store)", got)
	}
}
