// Package disk is what a store needs to know of the file system under
// it: how much is free (Free, and Space, which admits writes only above a
// reserve), how much a directory's files take (FilesBytes), and how to
// give back the pages of its mapped files (PageOutTables). It knows
// nothing of Badger's keys, archives or records.
package disk

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
)

// ErrReadOnly is Free's error for a file system mounted read-only.
var ErrReadOnly = errors.New("the file system is mounted read-only")

// Space decides whether a store in Dir may write: only while the file
// system has more free space than Reserve plus the size that Refresh was
// last given. It keeps the free bytes the file system reported at the
// last check and the bytes admitted since, so that a write costs a
// subtraction, not a statfs. The fields are set before first use and not
// changed after.
type Space struct {
	Dir      string
	Free     func(dir string) (int64, error) // the file system's free bytes (Free)
	Reserve  int64                           // < 0: no checks, every write is admitted
	Interval time.Duration                   // the longest an answer of Free is used
	Log      *slog.Logger                    // where changes of state are logged
	Now      func() time.Time
	// Refusal is the error that every refusal wraps.
	Refusal error

	mu       sync.Mutex
	avail    int64     // free bytes at the last check
	checked  time.Time // zero: never
	admitted int64     // bytes admitted since the last check (and those in flight at it)
	inflight int64     // bytes admitted whose write has not returned
	lsm      int64     // added to the reserve (Refresh)
	known    bool      // the state has been set once
	writable bool
	reason   error // why not writable (wraps Refusal)
	statErr  error // the last check's failure, if any
}

func (sp *Space) Disabled() bool { return sp.Reserve < 0 }

// floor is the free space below which nothing is written. Caller holds sp.mu.
func (sp *Space) floor() int64 { return sp.Reserve + sp.lsm }

// resumeAt is how much must be free for a cache that stopped writing to
// write again: the floor and an eighth more, so that the state does not
// flap (and log) on every write near the limit. Caller holds sp.mu.
func (sp *Space) resumeAt() int64 { return sp.floor() + sp.floor()/8 }

// check asks the file system for its free space. Caller holds sp.mu.
func (sp *Space) check() {
	sp.checked = sp.Now()
	sp.admitted = sp.inflight // writes under way may land after the statfs
	free, err := sp.Free(sp.Dir)
	sp.statErr = err
	if err == nil {
		sp.avail = free
	}
}

// room is the free space not yet promised to admitted writes. Caller holds sp.mu.
func (sp *Space) room() int64 { return sp.avail - sp.admitted }

// setWritable changes the state; a change is logged, once. Caller holds sp.mu.
func (sp *Space) setWritable(ok bool) {
	if !ok {
		sp.reason = sp.why()
	}
	if sp.known && ok == sp.writable {
		return
	}
	first := !sp.known
	sp.known, sp.writable = true, ok
	if ok {
		sp.reason = nil
		if !first {
			sp.Log.Info("cache writable again", "dir", sp.Dir, "free_bytes", sp.room(), "reserve_bytes", sp.floor())
		}
		return
	}
	if sp.readOnly() {
		sp.Log.Warn("cache not writable: its file system is mounted read-only; archives are served but not cached until it is writable",
			"dir", sp.Dir)
		return
	}
	args := []any{"dir", sp.Dir, "free_bytes", sp.room(), "reserve_bytes", sp.floor()}
	if sp.statErr != nil { // the free space could not be read
		args = append(args, "error", sp.statErr)
	}
	sp.Log.Warn("cache not writable: free disk space below the reserve; archives are served but not cached until there is room", args...)
}

// readOnly reports whether the last check found the file system mounted
// read-only. Caller holds sp.mu.
func (sp *Space) readOnly() bool { return errors.Is(sp.statErr, ErrReadOnly) }

// why says why the store does not write. Caller holds sp.mu. It names
// no path: /readyz and the status page show it to anyone who reaches the
// mirror (the warning logged when writes stop names the directory).
func (sp *Space) why() error {
	if sp.readOnly() {
		return fmt.Errorf("%w: %w", sp.Refusal, ErrReadOnly)
	}
	if sp.statErr != nil { // Free's errors name no path but ErrReadOnly's
		return fmt.Errorf("%w: checking the free space of its file system: %v", sp.Refusal, sp.statErr)
	}
	return fmt.Errorf("%w: %s free on its file system, below the %s reserve",
		sp.Refusal, humanize.IBytes(uint64(max(0, sp.room()))), humanize.IBytes(uint64(sp.floor())))
}

// Admit promises n bytes to a write about to be made, or returns why it
// may not be made. done must be called with n once the write returned.
func (sp *Space) Admit(n int64) error {
	if sp.Disabled() {
		return nil
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if !sp.known {
		sp.check()
		sp.setWritable(sp.statErr == nil && sp.room() >= sp.resumeAt())
	}
	if !sp.writable {
		// Only Refresh makes the store writable again, so
		// that a full disk costs no statfs per write.
		return sp.reason
	}
	if sp.Now().Sub(sp.checked) >= sp.Interval || sp.room()-n < sp.floor() {
		sp.check()
	}
	if sp.statErr != nil || sp.room()-n < sp.floor() {
		sp.setWritable(false)
		return sp.reason
	}
	sp.admitted += n
	sp.inflight += n
	return nil
}

// Done ends the write of n bytes that Admit admitted.
func (sp *Space) Done(n int64) {
	if sp.Disabled() {
		return
	}
	sp.mu.Lock()
	sp.inflight -= n
	sp.mu.Unlock()
}

// Refresh checks the free space now, with lsm the size to add to the
// reserve (the LSM tree's), and updates the state. It reports whether the store may write.
func (sp *Space) Refresh(lsm int64) bool {
	if sp.Disabled() {
		return true
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.lsm = lsm
	sp.check()
	switch {
	case sp.statErr != nil:
		sp.setWritable(false)
	case sp.writable:
		sp.setWritable(sp.room() >= sp.floor())
	default:
		// Also at start-up, where opening read-write writes itself.
		sp.setWritable(sp.room() >= sp.resumeAt())
	}
	return sp.writable
}

// CanWrite reports whether writes are admitted at the moment.
func (sp *Space) CanWrite() error {
	if sp.Disabled() {
		return nil
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if !sp.writable {
		return sp.reason
	}
	return nil
}

// Spare reports whether extra bytes beyond the floor are free (for
// value-log GC), by the last check.
func (sp *Space) Spare(extra int64) bool {
	if sp.Disabled() {
		return true
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.writable && sp.statErr == nil && sp.room() >= sp.floor()+extra
}

// FreeBytes is the free space at the last check, or -1 when unknown.
func (sp *Space) FreeBytes() int64 {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.checked.IsZero() || sp.statErr != nil {
		return -1
	}
	return sp.avail
}

// Headroom asks the file system now and returns the free space above the
// floor not yet promised to admitted writes; ok is false when it cannot
// tell.
func (sp *Space) Headroom() (room int64, ok bool) {
	if sp.Disabled() {
		return 0, false
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.check()
	if sp.statErr != nil {
		return 0, false
	}
	return sp.room() - sp.floor(), true
}

// Floor is the free space below which nothing is written: the reserve
// and the size Refresh was last given.
func (sp *Space) Floor() int64 {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.floor()
}
