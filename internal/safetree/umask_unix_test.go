//go:build unix

package safetree

import (
	"io/fs"
	"syscall"
)

// umask is the process's file mode creation mask, read and put back.
func umask() fs.FileMode {
	old := syscall.Umask(0)
	syscall.Umask(old)
	return fs.FileMode(old)
}
