//go:build !unix

package disk

import (
	"errors"
	"io/fs"
)

// Free is not implemented here: the free space is unknown, and a
// store that checks it does not write.
func Free(string) (int64, error) {
	return 0, errors.New("free space of a file system is not known on this platform")
}

// Allocated is the disk space a file takes: here, its size.
func Allocated(fi fs.FileInfo) int64 { return fi.Size() }
