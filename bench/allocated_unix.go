//go:build unix

package main

import (
	"io/fs"
	"syscall"
)

// allocated is the disk space the file fi takes: its allocated blocks.
func allocated(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}
