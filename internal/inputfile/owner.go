package inputfile

import (
	"io/fs"
	"os"
)

// OwnedBySelf reports whether info (of a file opened by this package) is
// owned by the process's effective user: a file the mirror wrote itself.
// Never on a system whose files have no owner's uid.
func OwnedBySelf(info fs.FileInfo) bool {
	uid, ok := Owner(info)
	return ok && uid == int64(os.Geteuid())
}

// otherOwner reports the owner of info (of a file opened by this
// package) when it is neither root nor the process's effective user: a
// user who may change the file whatever its mode (as sshd's StrictModes
// asks of the files it trusts). Never on a system whose files have no
// owner's uid.
func otherOwner(info fs.FileInfo) (uid int64, other bool) {
	uid, ok := Owner(info)
	if !ok || uid == 0 || uid == int64(os.Geteuid()) {
		return 0, false
	}
	return uid, true
}
