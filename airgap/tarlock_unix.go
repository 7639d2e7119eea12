//go:build !windows && !plan9 && !js && !wasip1 && !aix

package airgap

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// tarLocks: an export into a tar file holds its working directory's
// lock (lockTarTemp) while it writes, so that a later export tells a
// killed one's leftovers (no holder) from a live one's.
const tarLocks = true

// lockTarTemp takes the lock of the export's working directory f (an
// exclusive flock on it, without waiting), held until f is closed or
// its process ends, killed too. errTarTempTaken says another holds it.
func lockTarTemp(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return errTarTempTaken
	}
	return err
}
