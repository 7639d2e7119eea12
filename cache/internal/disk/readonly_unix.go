//go:build unix && !linux

package disk

import "golang.org/x/sys/unix"

// readOnly: not asked on this system; a write to a file system mounted
// read-only fails as it is made.
func readOnly(*unix.Statfs_t) bool { return false }
