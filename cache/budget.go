// The disk budget: with a size limit, the data directory stays within
// 1.25 times the archives plus the reserve, even while archives churn.

package cache

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/tfmirror/tfmirror/v2/cache/internal/disk"
)

// ErrOverBudget is returned (wrapped, with ErrNotWritable) for an archive
// chunk that could not be written within budgetWait because the data
// directory was at its budget (see diskBudget) and value-log GC did not
// return enough space in time. The download goes on without being cached,
// as on a full disk.
var ErrOverBudget = errors.New("the data directory is at its disk budget")

// budgetWait is how long an archive chunk waits for the value-log GC to
// bring the data directory under its budget before the archive is served
// without being cached.
const budgetWait = 10 * time.Second

// budgetMeasureEvery is the least time between two measures of the data
// directory by writers waiting for room.
const budgetMeasureEvery = 20 * time.Millisecond

// stuckAfter is how long a writer waits for the budget before GC rewrites
// files whatever their garbage (diskBudget.stuck).
const stuckAfter = time.Second

// diskBudget keeps the data directory within its budget: with a size
// limit (Options.MaxBytes), 1.25 times the limit plus the disk reserve;
// when what is left over the limit may not be evicted (see
// Blobs.SetEvictable), 1.25 times what is kept and being written
// instead. Deleted archives return their space only once value-log GC
// rewrote the files that held them, which Badger can do only after its
// compactions counted the deletions; under churn, archives are written
// faster than that. So each archive chunk is admitted only if the data
// directory, as last measured plus what was admitted since, stays within
// the budget less gcRoom; otherwise the writer asks for an eviction pass
// and an urgent GC and waits (budgetWait at most) for the space to come
// back. Metadata documents are small and not counted.
type diskBudget struct {
	dir  string // "" (in memory, or no size limit): no budget
	wait time.Duration
	// limit is the budget, which changes with what may be evicted.
	limit func() int64
	// gcRoom is kept free below the budget for value-log GC, which writes
	// the live part of a file (at most a file) before it deletes the file.
	gcRoom int64

	pressed atomic.Bool // a writer waits, or waited last: GC settles sooner
	// stuck says a writer has waited longer than stuckAfter: the garbage
	// left is spread thin (or sits in the newest value-log file, which
	// cannot be collected until it is full), so GC rewrites files with
	// any garbage, one per kick.
	stuck   atomic.Bool
	waits   atomic.Int64
	refused atomic.Int64

	mu       sync.Mutex
	used     int64     // the data directory's allocated bytes at the last measure
	measured time.Time // zero until the first write measures the directory
	admitted int64     // bytes admitted since the last measure
	inflight int64     // bytes admitted whose write has not returned
}

// measure reads the data directory's size. Caller holds b.mu.
func (b *diskBudget) measure() {
	b.used = dataDirBytes(b.dir)
	b.measured = time.Now()
	b.admitted = b.inflight // writes under way may land after the measure
}

// admit promises n bytes to a chunk about to be written, waiting for room
// (kick asks for eviction and GC) until budgetWait has passed or stop
// reports true. done must be called with n after the write when admit
// returned nil.
func (b *diskBudget) admit(n int64, kick func(), stop func() bool) error {
	if b.dir == "" {
		return nil
	}
	var deadline time.Time
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		limit := b.limit() - b.gcRoom
		// Never measured (the store just opened, maybe on a directory
		// full of archives): used is not yet known to be below anything.
		if b.measured.IsZero() || b.used+b.admitted+n > limit && time.Since(b.measured) >= budgetMeasureEvery {
			b.measure()
		}
		if b.used+b.admitted+n <= limit {
			b.admitted += n
			b.inflight += n
			b.stuck.Store(false)
			if b.used+b.admitted <= limit-limit/8 {
				b.pressed.Store(false) // GC may settle at its own pace again
			}
			return nil
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(b.wait)
			b.pressed.Store(true)
			b.waits.Add(1)
		}
		if time.Until(deadline) < b.wait-stuckAfter {
			b.stuck.Store(true)
		}
		kick()
		left := time.Until(deadline)
		if left <= 0 || stop() {
			b.refused.Add(1)
			return fmt.Errorf("%w: %w: %s used of %s, and value-log GC returned too little within %s",
				ErrNotWritable, ErrOverBudget, humanize.IBytes(uint64(b.used+b.admitted)), humanize.IBytes(uint64(limit)), b.wait)
		}
		b.mu.Unlock()
		time.Sleep(min(left, 4*budgetMeasureEvery))
		b.mu.Lock()
	}
}

func (b *diskBudget) done(n int64) {
	if b.dir == "" {
		return
	}
	b.mu.Lock()
	b.inflight -= n
	b.mu.Unlock()
}

// dataDirBytes is the disk space the files in dir take.
func dataDirBytes(dir string) int64 { return disk.FilesBytes(dir, "") }

// DiskBudget returns the data directory's size now and its budget (see
// Options.MaxBytes); ok is false when there is no budget (no size limit,
// or in memory).
func (s *Blobs) DiskBudget() (used, budget int64, ok bool) {
	if s.budget.dir == "" {
		return 0, 0, false
	}
	return dataDirBytes(s.budget.dir), s.budget.limit(), true
}

// BudgetStats says how often archive writes had to wait for the data
// directory's budget (see Options.MaxBytes), and how many of them gave up
// (the archive was served without being cached).
func (s *Blobs) BudgetStats() (waits, refused int64) {
	return s.budget.waits.Load(), s.budget.refused.Load()
}
