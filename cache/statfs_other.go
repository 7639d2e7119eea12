//go:build !unix

package cache

import (
	"errors"
	"io/fs"
)

// statfsFree is not implemented here: the free space is unknown and the
// cache is treated as not writable unless Options.DiskReserve is negative
// or Options.FreeSpace is set.
func statfsFree(string) (int64, error) {
	return 0, errors.New("free space of a file system is not known on this platform")
}

// allocated is the disk space a file takes: here, its size.
func allocated(fi fs.FileInfo) int64 { return fi.Size() }
