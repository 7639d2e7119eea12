package disk

import (
	"os"
	"strings"
)

// FilesBytes is the disk space (allocated blocks: Badger maps its logs at
// twice their size, sparsely) that the regular files in dir whose names
// end in suffix take.
func FilesBytes(dir, suffix string) int64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), suffix) {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			n += Allocated(fi)
		}
	}
	return n
}
