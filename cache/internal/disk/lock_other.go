//go:build windows || plan9 || js || wasip1 || aix

package disk

import "time"

// LockDir takes no lock here: Badger's own lock guards the directory
// (DirLock.Held is false).
func LockDir(string, time.Duration) (*DirLock, error) { return nil, nil }

// DirLock is a directory's lock taken by LockDir; nil where there is
// none (Badger's own lock guards the directory).
type DirLock struct{}

// Held says whether l is a lock, so that Badger is opened without its
// own.
func (l *DirLock) Held() bool { return l != nil }

// Release releases the lock. A nil DirLock has nothing to release.
func (l *DirLock) Release() error { return nil }
