package inputfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// modeBits: a file's permission bits say who may write it.
const modeBits = true

// readOnlyMount reports whether the file f is on a file system mounted
// read-only.
func readOnlyMount(f *os.File) bool {
	var st unix.Statfs_t
	return fstatfs(f, &st) && st.Flags&unix.ST_RDONLY != 0
}
