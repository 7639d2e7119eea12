//go:build !windows && !plan9 && !js && !wasip1 && !aix

package airgap

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// exportLocks: an export holds the lock (lockExport) of the directory
// it writes (OUT, or a tar file's working directory) while it writes, so
// that a later export tells a killed one's leftovers (no holder) from a
// live one's, and does not write into OUT while another does.
const exportLocks = true

// lockExport takes the lock of the directory f an export writes (an
// exclusive flock on it, without waiting), held until f is closed or
// its process ends, killed too. errExportLocked says another holds it.
func lockExport(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return errExportLocked
	}
	return err
}
