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
