package main

import (
	"errors"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/proxy"
)

// A cache whose database stops taking writes while its disk has room
// fails /readyz (the load balancer takes the mirror out), and
// tfmirror_cache_writable says so too: the alert on the gauge and the
// readiness probe read the same check. Once the database writes again,
// both say so.
func TestCacheWritableGaugeFollowsReadyz(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{})
	tm := startMirror(t, origin, t.TempDir(), nil)
	reg := tm.m.registry

	ready := func() int {
		t.Helper()
		resp, body, err := tm.get("readyz")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 && resp.StatusCode != 503 {
			t.Fatalf("/readyz = %d %s", resp.StatusCode, body)
		}
		return resp.StatusCode
	}
	// waitFor polls until /readyz answers code (its answer is kept for
	// proxy.HealthTTL) and returns the gauge read right after.
	waitFor := func(code int) float64 {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for ready() != code {
			if time.Now().After(deadline) {
				t.Fatalf("/readyz did not answer %d within 30s", code)
			}
			time.Sleep(proxy.HealthTTL / 10)
		}
		return metric(t, reg, "tfmirror_cache_writable")
	}

	if got := waitFor(200); got != 1 {
		t.Fatalf("ready: tfmirror_cache_writable = %v, want 1", got)
	}
	cachetest.FailPings(tm.m.store, errors.New("input/output error"))
	if got := waitFor(503); got != 0 {
		t.Errorf("/readyz answers 503 (the cache's test write fails) but tfmirror_cache_writable = %v, want 0", got)
	}
	cachetest.FailPings(tm.m.store, nil)
	if got := waitFor(200); got != 1 {
		t.Errorf("ready again: tfmirror_cache_writable = %v, want 1", got)
	}
}
