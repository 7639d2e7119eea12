//go:build !unix

package inputfile

import "io/fs"

// OwnedBySelf reports whether info is owned by the process's effective
// user; on this system, which has no such owner, never.
func OwnedBySelf(fs.FileInfo) bool { return false }

// otherOwner: this system's files have no owner's uid, and are not
// checked for it.
func otherOwner(fs.FileInfo) (uid int64, other bool) { return 0, false }

// Owner reports the owner's uid of info; this system has none.
func Owner(fs.FileInfo) (uid int64, ok bool) { return 0, false }
