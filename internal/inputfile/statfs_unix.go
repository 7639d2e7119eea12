//go:build linux || darwin || freebsd

package inputfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// fstatfs reads what the file system of f's descriptor says of itself
// into st, and reports whether it could.
func fstatfs(f *os.File, st *unix.Statfs_t) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Fstatfs(int(fd), st) }); err != nil {
		return false
	}
	return serr == nil
}
