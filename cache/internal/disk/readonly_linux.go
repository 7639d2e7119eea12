package disk

import "golang.org/x/sys/unix"

// readOnly reports whether st is of a file system mounted read-only.
func readOnly(st *unix.Statfs_t) bool { return st.Flags&unix.ST_RDONLY != 0 }
