package gate_test

import (
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
)

// twoReplicas is two replicas a and b on one versitygw bucket, sharing a
// fake clock; a lists 1.0.0 (the first listing) then 1.1.0, an hour
// apart; first is the time of a's first listing.
type twoReplicas struct {
	clock *enginetest.FakeClock
	cfg   func(name string) harness.Config
	a     *harness.Harness
	rig   releaseRig
	first time.Time
}

func newTwoReplicas(t *testing.T, kind string) *twoReplicas {
	t.Helper()
	srv := s3test.Start(t)
	open := bucketOn(t, srv)
	clock := enginetest.NewFakeClock()
	start := time.Now().Truncate(time.Second)
	clock.Set(start)
	cfg := func(name string) harness.Config {
		return harness.Config{Now: clock.Now, VersionsTTL: time.Minute, Shared: open(name)}
	}
	a := harness.New(t, harness.Options{Config: cfg("a")})
	rig := newReleaseRig(t, kind, a.Origin, start.Add(-365*day))
	r := &twoReplicas{clock: clock, cfg: cfg, a: a, rig: rig}
	rig.publish("1.0.0")
	r.first = r.listAt(a)
	rig.publish("1.1.0")
	r.listAt(a)
	return r
}

func (r *twoReplicas) listAt(h *harness.Harness) time.Time {
	r.clock.Add(time.Hour)
	r.rig.list(h)
	h.WaitIdle()
	return r.clock.Now()
}

// replicaTTL starts replica name with an empty cache on the bucket, with
// a VersionsTTL of ttl (when not zero).
func (r *twoReplicas) replicaTTL(t *testing.T, name string, ttl time.Duration) *harness.Harness {
	b := &harness.Harness{T: t, Origin: r.a.Origin}
	cfg := r.cfg(name)
	if ttl > 0 {
		cfg.VersionsTTL = ttl
	}
	b.Start(harness.Options{Config: cfg})
	return b
}

// Replica b, started with an empty cache (or one that never listed the
// provider), is asked for 1.1.0 within the time to live of a's list:
// it serves the bucket's list without a listing of its own, and dates
// 1.1.0 by the list's dates, not by its signature (a year old) alone. (b's time to live is set long: the bucket dates the list by
// the wall clock, the replicas by the test's.)
func TestReleaseAgeFromAnotherReplicasList(t *testing.T) {
	r := newTwoReplicas(t, "provider")
	b := r.replicaTTL(t, "b", 30*24*time.Hour)
	b.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "168h"`))
	heldUntil(t, "replica b, 1.1.0", r.rig.verdict(b, "1.1.0"), r.first.Add(168*time.Hour))
}

// A sealed replica with an empty cache on the bucket never lists: it
// serves the bucket's list, and dates 1.1.0 by the list's dates as a
// does, not by its signature alone. The archives were fetched before the policy was in force.
func TestReleaseAgeSealedEmptyCache(t *testing.T) {
	r := newTwoReplicas(t, "provider")
	r.a.ReadAll("1.0.0", "1.1.0") // before the policy was put in force: in the bucket
	r.a.WaitIdle()
	pol := enginetest.DecodePolicy(t, `minimum_release_age = "168h"`)
	r.a.Engine.SetPolicy(pol) // a judges both: their signature times are in the bucket
	heldUntil(t, "replica a: 1.1.0", r.rig.verdict(r.a, "1.1.0"), r.first.Add(168*time.Hour))
	if err := r.rig.verdict(r.a, "1.0.0"); err != nil {
		t.Fatal(err)
	}
	r.a.WaitIdle()
	cfg := r.cfg("b")
	cfg.Offline = true
	b := &harness.Harness{T: t, Origin: r.a.Origin}
	b.Start(harness.Options{Config: cfg})
	b.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "168h"`))
	heldUntil(t, "sealed replica b: 1.1.0", r.rig.verdict(b, "1.1.0"), r.first.Add(168*time.Hour))
	if err := r.rig.verdict(b, "1.0.0"); err != nil {
		t.Errorf("sealed replica b: 1.0.0: %v", err)
	}
}
