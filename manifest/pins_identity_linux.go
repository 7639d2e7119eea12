package manifest

import (
	"fmt"
	"io/fs"
	"syscall"
)

// fileIdentity is what tells a pins file apart from the one it replaced
// when their sizes and modification times are the same (a copy that
// keeps its source's time, renamed over it: rsync, a ConfigMap's
// update): its device and inode.
func fileIdentity(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%d/%d", st.Dev, st.Ino)
}
