package retention

import (
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	enginerig "github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/mirror"
)

// A replica without the unused rule (its configuration not rolled out
// yet, or the rule left to the others) writes its downloads to the shared
// store too, as it writes them to its cache: a replica with the rule
// counts them, and does not remove a version downloaded there yesterday.
func TestRetentionUnusedCountsReplicasWithoutTheRule(t *testing.T) {
	t.Parallel()
	clock := enginetest.NewFakeClock()
	tier := enginerig.NewMemTier()
	opts := harnessOptions{cfg: mirror.Config{Now: clock.Now}, shared: tier, ret: Config{UnusedAfter: 7 * 24 * time.Hour, Interval: -1}}
	a := newHarness(t, opts)
	a.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
	b := &harness{t: t, origin: a.origin}
	off := opts
	off.ret = Config{Interval: -1}
	b.start(off)
	a.readAll("1.0.0")
	b.readAll("1.0.0")
	clock.Add(5 * 24 * time.Hour)
	b.readAll("1.0.0") // day 5, on b only
	b.stop()           // its last uses written
	clock.Add(3 * 24 * time.Hour)
	if done, err := a.ret.Prune(t.Context(), PruneRequest{}); err != nil || len(done) != 0 {
		t.Errorf("day 8: removed %v (%v); b, without the rule, downloaded it on day 5", removalNames(done), err)
	}
}
