//go:build !unix

package inputfile

import "io/fs"

// Owner reports the owner's uid of info; this system has none, and its
// files are not checked for it.
func Owner(fs.FileInfo) (uid int64, ok bool) { return 0, false }

// OwnerIDs reports the owner's uid and gid of info; this system has
// none.
func OwnerIDs(fs.FileInfo) (uid, gid int64, ok bool) { return 0, 0, false }
