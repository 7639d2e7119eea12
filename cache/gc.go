// Returning the space of deleted archives to the disk: the memtable flush
// and compaction that mark it, then value-log garbage collection.

package cache

import (
	"context"
	"errors"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/tfmirror/tfmirror/v2/cache/internal/disk"
)

// Value-log GC rewrites a value-log file (its live part, into the newest
// file) and deletes it once at least a ratio of it is garbage. Files at
// least gcRatio garbage are always rewritten; while the value log is
// larger than the archives by more than the quarter the size limit allows,
// or while writers wait for the data directory's budget, files at least
// gcRatioTight garbage are too; once writers have waited long, any file
// with garbage, one per kick.
const (
	gcRatio      = 0.5
	gcRatioTight = 0.2
	// gcRatioStuck is the ratio while writers have waited for the disk
	// budget for long (diskBudget.stuck): one such round per kick.
	gcRatioStuck = 0.01
)

// minSettleInterval is the least time between two settles (flush and
// compaction, see settleDeletes): evictions under churn come in a stream,
// and each settle rewrites the LSM tree.
const minSettleInterval = 10 * time.Second

// urgentSettleInterval replaces minSettleInterval while writers wait for
// the data directory's budget (budget.go).
const urgentSettleInterval = time.Second

// flushKey is the key settleDeletes writes and drops to have Badger flush
// its memtable.
var flushKey = []byte("x/flush")

// settleFences are the keys settleDeletes writes, and keeps, with the
// flush: one sorts before every other key of the store and one after. The
// table the settle flushes spans every key with them, so its compaction
// takes in every table of the tree, those holding deletions an earlier
// settle could not count among them (see run).
var settleFences = [][]byte{[]byte("a/settle"), []byte("z/settle")}

// valueLogGC returns the space of deleted archives to the disk (run).
type valueLogGC struct {
	db     *database
	budget *diskBudget
	// archiveBytes is the committed archives' total size.
	archiveBytes func() int64
}

// DefaultGCInterval is how often the value-log GC runs when nothing kicks
// it (deletions do).
const DefaultGCInterval = 5 * time.Minute

// startGC starts the goroutine that returns the space of deleted archives
// to the disk (run), which closeDB stops and waits for: every command
// that opens the store, not only serve, evicts, prunes and replaces
// archives, and a data directory whose space never came back would end
// at its disk budget, refusing every archive. In memory there is no
// value log.
func (s *Store) startGC(opts Options) {
	if opts.InMemory {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stopGC, s.gcDone = cancel, make(chan struct{})
	go func() {
		defer close(s.gcDone)
		s.gc.run(ctx, DefaultGCInterval)
	}()
}

// run returns the space of deleted archives to the disk, until ctx is
// done: every interval, and soon after archives were evicted or deleted
// or interrupted writes removed (kickGC). Badger's value-log GC only
// rewrites value-log files that compactions have marked as garbage, and
// the deletion markers of evicted archives stay in the memtable, marking
// nothing, until it fills up (which deletions alone never make it do). So
// after deletions run first has Badger flush its memtable and compact
// the LSM tree into one level (settleDeletes), at most every
// minSettleInterval (urgentSettleInterval while writers wait for the data
// directory's budget), and then runs the value-log GC until it finds no
// file worth rewriting. A compaction counts only the deletions older than
// every read under way (Badger keeps what a read may still see): when a
// settle left deletions uncounted (a read that began before them, such as
// the count at Open, had not ended), it is followed by another once the
// interval has passed, without waiting for more deletions, which a cache
// at its disk budget with nothing left to evict would never make. A GC
// round rewrites up to a value-log file: it runs only when that much is
// free above the reserve, and never on a read-only cache.
func (g *valueLogGC) run(ctx context.Context, interval time.Duration) {
	d := g.db
	t := time.NewTicker(interval)
	defer t.Stop()
	var settled time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-d.gcKick:
		}
		// Let the deletions of the moment gather, less long once writers
		// wait for the data directory's budget.
		for d.deletes.Load() > 0 {
			every := minSettleInterval
			if g.budget.pressed.Load() {
				every = urgentSettleInterval
			}
			wait := every - time.Since(settled)
			if wait <= 0 {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(min(wait, urgentSettleInterval/4)):
			}
		}
		if d.deletes.Swap(0) > 0 {
			settled = time.Now()
			err := g.settleDeletes()
			switch {
			case err == nil && g.uncounted():
				d.deletes.Add(1) // settled again once the interval has passed
				d.kickGC()
			case err != nil:
				d.deletes.Add(1) // try again next time
				if !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNotWritable) && !errors.Is(err, ErrTablesDamaged) {
					d.log.Warn("compacting the cache after deletions", "error", quiet(err))
				}
			}
			if h := d.hooks.settled; h != nil {
				h()
			}
		}
		g.collect(func() bool { return ctx.Err() == nil })
	}
}

// collect runs value-log GC rounds while more says to go on, until a
// round finds no file worth rewriting (or fails), or the data
// directory's budget is stuck.
func (g *valueLogGC) collect(more func() bool) {
	for more() && g.round() == nil && !g.budget.stuck.Load() {
	}
}

// closeCollectTime bounds how long closing the store goes on collecting
// (collectBeforeClose): a command exits right after its last deletions,
// which the GC goroutine gathers for up to minSettleInterval first.
const closeCollectTime = 5 * time.Second

// collectBeforeClose settles the deletions the GC goroutine, stopped,
// had not settled yet, and runs the value-log GC until no file is worth
// rewriting, for at most closeCollectTime: what a command that opened
// the data directory by itself deleted (archives evicted, pruned or
// refused) returns to the disk as it exits, not at the next Open. Called
// by closeDB only where the GC goroutine ran (not in memory).
func (g *valueLogGC) collectBeforeClose() {
	until := time.Now().Add(closeCollectTime)
	if g.db.deletes.Swap(0) > 0 && g.settleDeletes() != nil {
		return
	}
	g.collect(func() bool { return time.Now().Before(until) })
}

// settleDeletes has Badger flush its memtable (where the deletion markers
// of recent deletions are) into a table, and compact the tables into one
// level, so that every deleted value's place in the value log is counted
// as garbage. Badger has no call that only flushes the memtable:
// DropPrefix flushes it before it drops, so a key is written to be
// dropped. The fences written with it make the flushed table span every
// key, so that the compaction takes in every table of the tree: one that
// holds deletions an earlier settle could not count is rewritten too.
// DropPrefix refuses writes while it runs; the store's own writes wait
// for it instead (writeMu).
func (g *valueLogGC) settleDeletes() error {
	d := g.db
	if d.space.Dir == "" {
		return nil // in memory: no value log
	}
	// The compaction writes every table again, without what follows a
	// damaged block.
	if err := d.checkTables(); err != nil {
		return err
	}
	return d.withWritable(func(db *badger.DB) error {
		err := func() error {
			d.writeMu.Lock()
			defer d.writeMu.Unlock()
			err := db.Update(func(txn *badger.Txn) error {
				for _, k := range append([][]byte{flushKey}, settleFences...) {
					if err := txn.Set(k, nil); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			return db.DropPrefix(flushKey)
		}()
		if err != nil {
			return err
		}
		return db.Flatten(1)
	})
}

// uncounted reports whether the tree holds deletions that the last
// compaction kept rather than counted: Badger keeps a deletion marker,
// and the value it deleted, while a read older than the deletion is under
// way, and counts the marker as stale data in its table. A store that
// uses no expiry has no other stale data once the tree is in one level.
func (g *valueLogGC) uncounted() bool {
	var kept bool
	g.db.withDB(func() error {
		if g.db.bdb == nil {
			return nil
		}
		for _, t := range g.db.bdb.Tables() {
			kept = kept || t.StaleDataSize > 0
		}
		return nil
	})
	return kept
}

// round rewrites (and deletes) at most one value-log file. The store's
// own writes wait while it runs (writeMu): a rewrite starts by reading the
// memtable's newest version, which Badger's write goroutine updates
// without a lock, so a write of the store's at that moment is a data race
// inside Badger. A round rewrites at most the live part of one value-log
// file.
func (g *valueLogGC) round() error {
	d := g.db
	if d.tablesDamaged.Load() {
		// Its check of which values are live reads the tables.
		return ErrTablesDamaged
	}
	return d.withWritable(func(db *badger.DB) error {
		if !d.space.Spare(d.bopts.ValueLogFileSize) {
			return ErrNotWritable
		}
		ratio := gcRatio
		if archives := g.archiveBytes(); g.budget.pressed.Load() || vlogBytes(d.space.Dir) > archives+archives/4+d.bopts.ValueLogFileSize {
			ratio = gcRatioTight
		}
		if g.budget.stuck.Load() {
			ratio = gcRatioStuck
		}
		d.writeMu.Lock()
		defer d.writeMu.Unlock()
		return db.RunValueLogGC(ratio)
	})
}

// vlogBytes is the disk space the value-log files in dir take.
func vlogBytes(dir string) int64 { return disk.FilesBytes(dir, ".vlog") }
