package gate_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// A replica whose clock is a month ahead dates the versions it sees
// first a month ahead too (its listings are taken, by its clock, then).
// Another replica, whose clock is right, takes those datings from the
// bucket no later than its own time: a listing, whoever's it was, was
// taken before now. It held the version a month longer than the minimum
// release age (a clock years ahead: for years), on every replica, long
// after the clock that was ahead was put right.
func TestReleaseAgeReplicaClockAhead(t *testing.T) {
	for _, kind := range []string{"provider", "module"} {
		t.Run(kind, func(t *testing.T) {
			r := newReplicas(t, kind)
			ahead := enginetest.NewFakeClock()
			ahead.Set(r.clock.Now().Add(30 * day))
			cfg := r.cfg("b")
			cfg.Now = ahead.Now
			b := r.replica(t, cfg)
			r.publish("1.0.0")
			r.first = r.listAt(r.a)
			ahead.Add(time.Hour)
			r.list(b)
			b.WaitIdle()
			r.publish("1.1.0")
			ahead.Add(time.Hour)
			r.list(b)
			b.WaitIdle()
			at := r.listAt(r.a)

			r.a.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "168h"`))
			var perr *gate.PolicyError
			err := r.verdict(r.a, "1.1.0")
			if !errors.As(err, &perr) || perr.Verdict.Rule != policy.RuleMinReleaseAge {
				t.Fatalf("1.1.0, first listed a few hours ago: %v, want it held by the minimum release age", err)
			}
			if until := perr.Verdict.AvailableAt; until.After(at.Add(168 * time.Hour)) {
				t.Errorf("1.1.0 is held until %v, a week from the dating of the replica whose clock is a month ahead; want no later than %v, a week from now", until, at.Add(168*time.Hour))
			}
			r.clock.Set(at.Add(168 * time.Hour))
			if err := r.verdict(r.a, "1.1.0"); err != nil {
				t.Errorf("1.1.0, a week after it was first listed: %v, want it served", err)
			}
		})
	}
}
