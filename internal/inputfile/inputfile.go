// Package inputfile opens the files and directories of an input tree
// that others may change while it is read (a directory given to tfmirror
// import, a module's files packed from a directory): an open never blocks
// (opening a FIFO for reading waits for a writer, for ever, and a FIFO
// can be put in place of a file between the listing that named it and the
// open), never follows a link in place of the file (O_NOFOLLOW), and what
// was opened is checked on its descriptor to be what was asked for: a
// regular file, or a directory. Every read of an import's input goes
// through it, and every reading of an operator's file (OpenOperator, which
// follows links but never waits either): the configuration, the tokens,
// the pins, the keys, the certificates, and every file
// internal/hclfile.Parse reads. ReadOperator reads an operator's file
// whole, within the bound its caller gives; OpenTrusted and ReadTrusted
// open a file whose content the mirror trusts (a secret, a key, a CA, the
// configuration) and refuse it when a user other than root and the
// mirror's own may write it: its owner, its group, or all users.
//
// It owns the opening, and WalkIn, the walk of a tree that opens its
// directories so, a batch of entries at a time: which names to open, how
// much of a file to read and how many entries to take are its callers'.
package inputfile

import (
	"fmt"
	"io/fs"
	"os"
)

// KindError refuses a name that is not of the kind asked for.
type KindError struct {
	Path string
	Kind string // as Kind says it: "a FIFO", "a symbolic link", ...
	Want string // "a regular file" or "a directory"
}

func (e *KindError) Error() string {
	return fmt.Sprintf("%s is %s, not %s: refused", e.Path, e.Kind, e.Want)
}

const (
	regular   = "a regular file"
	directory = "a directory"
)

// Open opens the regular file at path for reading, and returns it with
// what its descriptor says of it. A link, a FIFO, a device, a socket or a
// directory at path is a *KindError, and the open never waits.
func Open(path string) (*os.File, fs.FileInfo, error) {
	return open(path, false)
}

// OpenOperator opens the regular file at path, one of the operator's
// (the configuration file, the client tokens file), for reading, and
// returns it with what its descriptor says of it. Unlike Open it follows
// a link (a mounted ConfigMap's or Secret's files are links), but, as
// Open, it never waits: what the name leads to when it is opened is
// checked on the descriptor, and a FIFO, a device, a socket or a
// directory there is a *KindError. What was checked is what is read,
// whatever the name leads to a moment later.
func OpenOperator(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|nonBlock, 0)
	if err != nil {
		return nil, nil, err
	}
	info, err := check(path, f, false)
	if err != nil {
		return nil, nil, err
	}
	return f, info, nil
}

// OpenDir opens the directory at path for reading its entries, on the
// same terms: a link or anything else but a directory is a *KindError.
func OpenDir(path string) (*os.File, error) {
	f, _, err := open(path, true)
	return f, err
}

// OpenIn opens the regular file name in root, on the same terms: the
// root keeps the open inside it (whatever links or ".." the directories
// on the way hold, or come to hold), and a link at name is refused even
// where it would lead inside the root.
func OpenIn(root *os.Root, name string) (*os.File, fs.FileInfo, error) {
	return openIn(root, name, false)
}

// OpenDirIn opens the directory name in root, on the same terms.
func OpenDirIn(root *os.Root, name string) (*os.File, error) {
	f, _, err := openIn(root, name, true)
	return f, err
}

func openIn(root *os.Root, name string, dir bool) (*os.File, fs.FileInfo, error) {
	want := regular
	if dir {
		want = directory
	}
	before, err := root.Lstat(name)
	if err != nil {
		return nil, nil, err
	}
	if dir && !before.IsDir() || !dir && !before.Mode().IsRegular() {
		return nil, nil, &KindError{Path: name, Kind: Kind(before.Mode()), Want: want}
	}
	// The root opens name's last part with O_NOFOLLOW, then follows a
	// link inside the root: what it opened is compared with what the
	// Lstat saw instead.
	f, err := root.OpenFile(name, os.O_RDONLY|openFlags, 0)
	if err != nil {
		return nil, nil, err
	}
	info, err := check(name, f, dir)
	if err != nil {
		return nil, nil, err
	}
	if !os.SameFile(before, info) {
		// A link or another file put in its place since the Lstat.
		f.Close()
		return nil, nil, fmt.Errorf("%s changed while it was opened: refused", name)
	}
	return f, info, nil
}

func open(path string, dir bool) (*os.File, fs.FileInfo, error) {
	want := regular
	if dir {
		want = directory
	}
	var before fs.FileInfo
	if openFlags == 0 {
		// Without O_NOFOLLOW: the name is looked at first, and the
		// descriptor must be the file looked at.
		var err error
		if before, err = os.Lstat(path); err != nil {
			return nil, nil, err
		}
		if before.Mode()&fs.ModeSymlink != 0 {
			return nil, nil, &KindError{Path: path, Kind: Kind(before.Mode()), Want: want}
		}
	}
	f, err := os.OpenFile(path, os.O_RDONLY|openFlags, 0)
	if err != nil {
		if isLink(err) {
			return nil, nil, &KindError{Path: path, Kind: Kind(fs.ModeSymlink), Want: want}
		}
		return nil, nil, err
	}
	info, err := check(path, f, dir)
	if err != nil {
		return nil, nil, err
	}
	if before != nil && !os.SameFile(before, info) {
		f.Close()
		return nil, nil, fmt.Errorf("%s changed while it was opened: refused", path)
	}
	return f, info, nil
}

// check returns what f's descriptor says of it when it is of the kind
// asked for; otherwise it closes f.
func check(path string, f *os.File, dir bool) (fs.FileInfo, error) {
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	switch {
	case dir && !info.IsDir():
		f.Close()
		return nil, &KindError{Path: path, Kind: Kind(info.Mode()), Want: directory}
	case !dir && !info.Mode().IsRegular():
		f.Close()
		return nil, &KindError{Path: path, Kind: Kind(info.Mode()), Want: regular}
	}
	return info, nil
}

// Kind names the kind of file of mode m.
func Kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsRegular():
		return "a regular file"
	default:
		return "not a regular file"
	}
}
