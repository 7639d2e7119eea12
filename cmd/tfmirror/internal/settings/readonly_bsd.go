//go:build darwin || freebsd

package settings

import "golang.org/x/sys/unix"

// readOnlyMount reports whether the file at path (its target, when a
// link) is on a file system mounted read-only.
func readOnlyMount(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Flags&unix.MNT_RDONLY != 0
}
