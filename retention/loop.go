package retention

import (
	"context"
	"runtime/debug"
	"time"
)

// rebuildGap is the least time between two rebuilds that wakes ask for.
const rebuildGap = time.Second

// loop is the background work, until ctx ends (Close): the first reading
// of the pins and rebuild, the rules every Interval, the removal of the
// archives no record names (at most every unnamedEvery, each Interval or
// hour), rebuilds asked for
// (ImportEnded, a pinned archive served) or when the pins change, and the
// batches of last uses.
func (r *Retainer) loop(ctx context.Context) {
	defer close(r.done)
	defer r.flush()
	r.pins.first(r.log)
	r.rebuild()
	// The first rebuild read every package record: garbage in proportion
	// to the cache, which the Go runtime would keep for minutes.
	debug.FreeOSMemory()
	rules := (r.cfg.KeepVersions > 0 || r.cfg.UnusedAfter > 0) && r.cfg.Interval > 0
	pass := time.NewTicker(max(r.cfg.Interval, time.Hour))
	if rules {
		pass.Reset(r.cfg.Interval)
	}
	defer pass.Stop()
	pins := time.NewTicker(r.cfg.PinsInterval)
	defer pins.Stop()
	flush := time.NewTicker(r.cfg.FlushInterval)
	defer flush.Stop()
	if rules {
		r.apply(ctx)
	}
	var lastWoken time.Time    // the last rebuild a wake asked for
	var again <-chan time.Time // a wake that came within rebuildGap of it
	for {
		select {
		case <-ctx.Done():
			return
		case <-pass.C:
			if rules {
				r.apply(ctx)
			}
			r.sweepUnnamedDue(ctx)
		case <-r.wake:
			// Rebuilds asked for in a row (an import of many versions)
			// run at most every rebuildGap: each reads every record.
			if wait := rebuildGap - time.Since(lastWoken); wait > 0 {
				if again == nil {
					again = time.After(wait)
				}
				continue
			}
			lastWoken = time.Now()
			r.rebuild()
		case <-again:
			again, lastWoken = nil, time.Now()
			r.rebuild()
		case <-pins.C:
			if r.pins.read(r.log) {
				r.rebuild()
			}
		case <-flush.C:
			r.flush()
		}
	}
}

// apply runs the rules once, in the background: on the cache, and at
// most every sharedPruneEvery on the shared store's bucket.
func (r *Retainer) apply(ctx context.Context) {
	r.flush()
	if _, err := r.Prune(ctx, PruneRequest{}); err != nil && ctx.Err() == nil {
		r.log.Warn("applying the retention rules", "error", err)
	}
	if now := r.now(); r.shared != nil && now.Sub(r.lastShared) >= sharedPruneEvery {
		r.lastShared = now
		if _, err := r.pruneShared(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("applying the retention rules to the shared store", "error", err)
		}
	}
}
