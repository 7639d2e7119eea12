//go:build unix

package disk

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// Free is the space on dir's file system that this process may use
// (blocks available to unprivileged users: root's reserved blocks on ext4
// are not counted, which errs on the safe side). A directory not created
// yet is on the file system of its nearest existing parent. A file system
// mounted read-only (a disk the kernel remounted so after errors) has no
// space to use: ErrReadOnly.
func Free(dir string) (int64, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return 0, err
	}
	for {
		var st unix.Statfs_t
		err := unix.Statfs(dir, &st)
		if err == nil && readOnly(&st) {
			return 0, fmt.Errorf("%w: %s", ErrReadOnly, dir)
		}
		if err == nil {
			return int64(st.Bavail) * int64(st.Bsize), nil
		}
		parent := filepath.Dir(dir)
		if !errors.Is(err, fs.ErrNotExist) || parent == dir {
			return 0, err
		}
		dir = parent
	}
}

// Allocated is the disk space a file takes: its Allocated blocks, which
// for a sparse file are fewer than its size.
func Allocated(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}
