//go:build !unix

package cache

import "errors"

// statfsFree is not implemented here: the free space is unknown and the
// cache is treated as not writable unless Options.DiskReserve is negative
// or Options.FreeSpace is set.
func statfsFree(string) (int64, error) {
	return 0, errors.New("free space of a file system is not known on this platform")
}
