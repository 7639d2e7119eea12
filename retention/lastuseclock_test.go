package retention

import (
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/mirror"
)

// A clock set back (a wrong time, corrected later) does not make a last
// use earlier: a download at the time set back leaves the later use
// recorded before it, in memory and in the cache, as the shared store
// keeps the later of two (shareUses). Before, the earlier one replaced
// it, and once the clock was right again the unused rule removed a
// version downloaded two days before.
func TestRetentionLastUseKeepsTheLaterAfterClockSetBack(t *testing.T) {
	t.Parallel()
	const day = 24 * time.Hour
	for _, flushed := range []bool{false, true} {
		name := "in memory"
		if flushed {
			name = "written"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clock := enginetest.NewFakeClock()
			opts := harnessOptions{cacheDir: t.TempDir(), cfg: mirror.Config{Now: clock.Now}, ret: Config{UnusedAfter: 7 * day, Interval: -1}}
			h := newHarness(t, opts)
			h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
			h.readAll("1.0.0") // day 0
			clock.Add(6 * day)
			h.readAll("1.0.0") // day 6
			if flushed {
				h.ret.flush()
			}
			clock.Add(-30 * day) // set back to day -24
			h.readAll("1.0.0")
			h.ret.flush()
			clock.Add(32 * day) // right again: day 8
			if done, err := h.ret.Prune(t.Context(), PruneRequest{}); err != nil || len(done) != 0 {
				t.Errorf("day 8: removed %v (%v); downloaded on day 6", removalNames(done), err)
			}
		})
	}
}
