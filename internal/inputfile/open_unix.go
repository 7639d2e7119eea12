//go:build unix

package inputfile

import (
	"errors"
	"syscall"
)

// openFlags: a FIFO opens at once instead of waiting for a writer, and a
// link in place of the file fails the open. Reads of a regular file or
// directory are not affected by O_NONBLOCK.
const openFlags = syscall.O_NOFOLLOW | nonBlock

// nonBlock: a FIFO opens at once instead of waiting for a writer.
const nonBlock = syscall.O_NONBLOCK

// isLink reports whether err is how an open with O_NOFOLLOW refuses a
// link: ELOOP, or EMLINK on FreeBSD.
func isLink(err error) bool {
	return errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EMLINK)
}
