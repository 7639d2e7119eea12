//go:build !unix

package inputfile

// openFlags: none on this system, which has no O_NOFOLLOW or FIFOs that
// block an open: a link is refused by an Lstat before the open, and a
// file put in its place since is refused by comparing the two.
const openFlags = 0

func isLink(error) bool { return false }

// nonBlock: none on this system, whose FIFOs do not block an open.
const nonBlock = 0
