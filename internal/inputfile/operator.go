package inputfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
)

// TooLargeError refuses an operator's file longer than the most that is
// read of it.
type TooLargeError struct {
	Path string
	Max  int64 // bytes
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %d bytes, the most read of such a file: refused", e.Path, e.Max)
}

// WritableError refuses an operator's file that users other than its
// owner may write: those of its group, or all users.
type WritableError struct {
	Path string
	Mode fs.FileMode // its permission bits
}

func (e *WritableError) Error() string {
	return fmt.Sprintf("%s has mode %04o: users of its group or all users may change what the mirror serves and trusts, so it is not read; make it writable by its owner only: chmod go-w %s",
		e.Path, e.Mode.Perm(), e.Path)
}

// OwnerError refuses an operator's file owned by a user who is neither
// root nor the one the mirror runs as: that user may change it whatever
// its mode.
type OwnerError struct {
	Path string
	UID  int64       // its owner
	Self int         // the process's effective user
	Mode fs.FileMode // its permission bits
}

func (e *OwnerError) Error() string {
	msg := fmt.Sprintf("%s is owned by user %d, neither root nor the user the mirror runs as (%d): user %d may change what the mirror serves and trusts, so it is not read; make it root's or the mirror's user's: chown root %s",
		e.Path, e.UID, e.Self, e.UID, e.Path)
	if e.Self != 0 {
		msg += fmt.Sprintf(" (or chown %d %s)", e.Self, e.Path)
	}
	if e.Mode.Perm()&0o022 != 0 {
		msg += fmt.Sprintf(", and writable by its owner only: chmod go-w %s (it has mode %04o)", e.Path, e.Mode.Perm())
	}
	if e.Self == 0 {
		// Run as root, a command (config check, export) judges the file
		// as a mirror running as root would; a mirror running as its
		// owner reads it.
		msg += fmt.Sprintf("; this was judged as root: if the mirror runs as user %d, run this command as that user to judge the file as it does", e.UID)
	}
	return msg
}

// ReadOperator reads the whole of the operator's file at path, opened as
// OpenOperator opens it, and no more than max bytes of it: a longer file
// is a *TooLargeError naming it and the bound, whatever its size said
// when it was opened (a file still growing).
//
// A file that changed while it was read (its size or modification time
// not the same after the read as when it was opened: a file written in
// place as it is read, whose later lines the read would miss) is read
// again, opened anew, up to readTries times in all; then it is a
// *ChangedError.
func ReadOperator(path string, max int64) ([]byte, error) {
	return readSettled(path, max, OpenOperator)
}

// readTries bounds the reads of a file that changes while it is read.
const readTries = 3

// ChangedError refuses an operator's file that changed while each of
// readTries reads of it went on.
type ChangedError struct {
	Path string
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("%s changed while it was read, %d times: refused; write such a file whole and rename it into place", e.Path, readTries)
}

// afterRead, when set by a test, runs between a read of a file and the
// look at whether it changed meanwhile.
var afterRead func(path string)

// readSettled reads the file at path, opened by open, as ReadOperator
// says.
func readSettled(path string, max int64, open func(string) (*os.File, fs.FileInfo, error)) ([]byte, error) {
	for range readTries {
		data, settled, err := readOnce(path, max, open)
		if err != nil || settled {
			return data, err
		}
	}
	return nil, &ChangedError{Path: path}
}

// readOnce reads the file at path once, and says whether it was the same
// after the read as when it was opened.
func readOnce(path string, max int64, open func(string) (*os.File, fs.FileInfo, error)) ([]byte, bool, error) {
	f, before, err := open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	data, err := readBounded(path, f, max)
	if err != nil {
		return nil, false, err
	}
	if afterRead != nil {
		afterRead(path)
	}
	after, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	return data, after.Size() == before.Size() && after.ModTime().Equal(before.ModTime()), nil
}

// OpenTrusted is OpenOperator of a file whose content the mirror trusts:
// one that holds a secret (a token, a key) or says what is trusted (a
// public key, a CA certificate, the configuration). A file owned by a
// user other than root and the process's effective user is an
// *OwnerError, and one that users other than its owner may write (its
// group's or all users' write bit) a *WritableError, both refused before
// it is read: whoever may write it could give the mirror their own key.
// A file on a file system mounted read-only (a Kubernetes Secret's or
// ConfigMap's volume) cannot be written through that mount whatever its
// mode and owner, and is read; whoever may write the file behind a
// read-only bind mount is not known here. All is checked on the
// descriptor opened. Windows has no such bits or owners, and is not
// checked.
func OpenTrusted(path string) (*os.File, fs.FileInfo, error) {
	f, info, err := OpenOperator(path)
	if err != nil {
		return nil, nil, err
	}
	if err := othersMayWrite(path, f, info); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, info, nil
}

// othersMayWrite refuses the file f at path, described by info, when a
// user other than root and the process's may write it, and it is not on
// a read-only mount.
func othersMayWrite(path string, f *os.File, info fs.FileInfo) error {
	if !modeBits {
		return nil
	}
	perm := info.Mode().Perm()
	uid, other := otherOwner(info)
	if !other && perm&0o022 == 0 || readOnlyMount(f) {
		return nil
	}
	if other {
		return &OwnerError{Path: path, UID: uid, Self: os.Geteuid(), Mode: perm}
	}
	return &WritableError{Path: path, Mode: perm}
}

// ReadTrusted is ReadOperator of a file opened by OpenTrusted.
func ReadTrusted(path string, max int64) ([]byte, error) {
	return readSettled(path, max, OpenTrusted)
}

func readBounded(path string, f *os.File, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, &TooLargeError{Path: path, Max: max}
	}
	return data, nil
}
