package gate_test

import (
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
)

// Replica b, started with an empty cache (or one that never listed the
// provider), is asked for 1.1.0 within the time to live of a's list:
// it serves the bucket's list without a listing of its own, and dates
// 1.1.0 by the list's dates, not by its signature (a year old) alone.
// (b's time to live is set long: the bucket dates the list by the wall
// clock, the replicas by the test's.)
func TestReleaseAgeFromAnotherReplicasList(t *testing.T) {
	r := newListedTwice(t, "provider")
	cfg := r.cfg("b")
	cfg.VersionsTTL = 30 * 24 * time.Hour
	b := r.replica(t, cfg)
	b.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "168h"`))
	heldUntil(t, "replica b, 1.1.0", r.verdict(b, "1.1.0"), r.first.Add(168*time.Hour))
}

// A sealed replica with an empty cache on the bucket never lists: it
// serves the bucket's list, and dates 1.1.0 by the list's dates as a
// does, not by its signature alone. The archives were fetched before the
// policy was in force.
func TestReleaseAgeSealedEmptyCache(t *testing.T) {
	r := newListedTwice(t, "provider")
	r.a.ReadAll("1.0.0", "1.1.0") // before the policy was put in force: in the bucket
	r.a.WaitIdle()
	pol := enginetest.DecodePolicy(t, `minimum_release_age = "168h"`)
	r.a.Engine.SetPolicy(pol) // a judges both: their signature times are in the bucket
	heldUntil(t, "replica a: 1.1.0", r.verdict(r.a, "1.1.0"), r.first.Add(168*time.Hour))
	if err := r.verdict(r.a, "1.0.0"); err != nil {
		t.Fatal(err)
	}
	r.a.WaitIdle()
	cfg := r.cfg("b")
	cfg.Offline = true
	b := r.replica(t, cfg)
	b.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "168h"`))
	heldUntil(t, "sealed replica b: 1.1.0", r.verdict(b, "1.1.0"), r.first.Add(168*time.Hour))
	if err := r.verdict(b, "1.0.0"); err != nil {
		t.Errorf("sealed replica b: 1.0.0: %v", err)
	}
}
