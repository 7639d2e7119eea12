//go:build unix

package inputfile

import (
	"io/fs"
	"syscall"
)

// Owner reports the owner's uid of info (of a file opened or looked at
// by this package's callers), where the system has one.
func Owner(info fs.FileInfo) (uid int64, ok bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int64(st.Uid), true
}

// OwnerIDs reports the owner's uid and gid of info, where the system
// has them.
func OwnerIDs(info fs.FileInfo) (uid, gid int64, ok bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int64(st.Uid), int64(st.Gid), true
}
