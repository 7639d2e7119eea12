package airgap

import (
	"crypto/rand"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// errExportLocked: another holds the lock of the directory an export
// writes (lockExport).
var errExportLocked = errors.New("held by another export")

// makeTarTemp makes the working directory of an export into a tar file
// in dir (tarTempPrefix and 26 base32 characters, mode 0700) and takes
// its lock (lockExport), which the export holds until it closes lock,
// once it removed the directory: a later export then knows it for a
// live export's, not a killed one's (tarTempDead). A directory that
// another export's sweep took for a killed one's meanwhile (its lock
// taken first, or the directory gone by the time the lock was had) is
// given up for another name.
func makeTarTemp(dir string) (path string, lock *os.File, err error) {
	for range 100 {
		path = filepath.Join(dir, tarTempPrefix+rand.Text())
		if err := os.Mkdir(path, 0o700); errors.Is(err, fs.ErrExist) {
			continue
		} else if err != nil {
			return "", nil, err
		}
		lock, err = os.Open(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return "", nil, err
		}
		err = lockExport(lock)
		if err == nil {
			held, serr := lock.Stat()
			there, lerr := os.Lstat(path)
			if serr == nil && lerr == nil && os.SameFile(held, there) {
				return path, lock, nil
			}
		}
		lock.Close()
		if err != nil && !errors.Is(err, errExportLocked) {
			return "", nil, err
		}
	}
	return "", nil, errors.New("no working directory for the export could be made beside " + dir + ": every name tried was taken")
}

// tarTempDead says whether name, in root, what an export into a tar file
// writes beside it (isTarTempName), was left by one that is gone. Where
// there are locks (exportLocks), what an export of this release leaves
// (base32 names) is of one that is gone, killed, when its working
// directory has no lock holder, however lately it was written, and
// unlock then holds that lock until the caller has removed it, so that
// no export takes the directory meanwhile (makeTarTemp); a tar file
// whose working directory is gone is of one that is gone too (an export
// removes its tar file before its directory). Otherwise (the names of an
// earlier release, whose exports take no lock, or no locks here), it is
// when nothing in it was written for staleTempAge.
func tarTempDead(root *os.Root, name string) (unlock func(), dead bool, err error) {
	none := func() {}
	base := strings.TrimSuffix(name, ".tar")
	rest := strings.TrimPrefix(base, tarTempPrefix)
	if !exportLocks || !isRandText(rest) {
		fresh, err := writtenSince(root, name, time.Now().Add(-staleTempAge))
		return none, err == nil && !fresh, err
	}
	f, err := root.Open(base)
	if errors.Is(err, fs.ErrNotExist) && base != name {
		return none, true, nil
	}
	if err != nil {
		return none, false, err
	}
	if err := lockExport(f); err != nil {
		f.Close()
		if errors.Is(err, errExportLocked) {
			err = nil
		}
		return none, false, err
	}
	return func() { f.Close() }, true, nil
}
