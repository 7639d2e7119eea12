//go:build !windows && !plan9 && !js && !wasip1 && !aix

package disk

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// LockDir takes the exclusive lock on directory dir that Badger takes
// when it opens a database read-write (flock on the directory), waiting
// up to wait for it: a process that released it a moment ago can still
// hold it through a child it forked while the directory was open (the
// child closes it on exec), which is over in milliseconds. A process
// that really holds the directory still refuses after wait, with the
// error Badger gives then. Here the lock is held by the caller, who
// opens Badger without its own lock guard (which would conflict with
// this one), read-write or read-only (where Badger's lock is shared, and
// would let in a second process).
func LockDir(dir string, wait time.Duration) (*DirLock, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot open directory %q err: %w", dir, err)
	}
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	for deadline := time.Now().Add(wait); errors.Is(err, unix.EWOULDBLOCK) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	}
	if err != nil {
		f.Close()
		// Badger's words, so that a held directory is refused alike
		// whichever of the two found it held.
		return nil, fmt.Errorf("Cannot acquire directory lock on %q.  Another process is using this Badger database. err: %w", dir, err) //nolint:staticcheck // Badger's message
	}
	return &DirLock{f: f}, nil
}

// DirLock is a directory's lock taken by LockDir; nil where there is
// none (Badger's own lock guards the directory).
type DirLock struct{ f *os.File }

// Held says whether l is a lock, so that Badger is opened without its
// own.
func (l *DirLock) Held() bool { return l != nil }

// Release releases the lock. A nil DirLock has nothing to release.
func (l *DirLock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the last descriptor releases the flock
	l.f = nil
	return err
}
