//go:build unix

package inputfile

import (
	"io/fs"
	"os"
	"syscall"
)

// OwnedBySelf reports whether info (of a file opened by this package) is
// owned by the process's effective user: a file the mirror wrote itself.
func OwnedBySelf(info fs.FileInfo) bool {
	st, ok := info.Sys().(*syscall.Stat_t)
	return ok && int64(st.Uid) == int64(os.Geteuid())
}

// Owner reports the owner's uid of info (of a file opened or looked at
// by this package's callers), where the system has one.
func Owner(info fs.FileInfo) (uid int64, ok bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int64(st.Uid), true
}

// otherOwner reports the owner of info (of a file opened by this
// package) when it is neither root nor the process's effective user: a
// user who may change the file whatever its mode (as sshd's StrictModes
// asks of the files it trusts).
func otherOwner(info fs.FileInfo) (uid int64, other bool) {
	uid, ok := Owner(info)
	if !ok || uid == 0 || OwnedBySelf(info) {
		return 0, false
	}
	return uid, true
}
