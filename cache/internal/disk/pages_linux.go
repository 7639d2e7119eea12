//go:build linux

package disk

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// PageOutTables asks the kernel to reclaim the pages of the table files
// (*.sst) in dir that this process has mapped (madvise MADV_PAGEOUT,
// Linux 5.4 and later; an older kernel refuses and nothing changes), and
// to read only the pages asked for from then on (MADV_RANDOM): the
// lookups that follow (a record here and there) would otherwise map the
// pages around each one too. Both advices are nondestructive: a page
// read again is read from the file, and applied to memory that is no
// longer a table's mapping (a table unmapped after /proc/self/maps was
// read) they change nothing either.
func PageOutTables(dir string) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real // the kernel names files by their real path
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ADDR-ADDR PERMS OFFSET DEV INODE PATH, the path last.
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		path := strings.Join(fields[5:], " ")
		if !strings.HasSuffix(path, ".sst") || filepath.Dir(path) != dir {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_PAGEOUT); errno != 0 {
			return // not supported: no other mapping fares better
		}
		unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_RANDOM)
	}
}
