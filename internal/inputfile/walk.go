package inputfile

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path"
)

// WalkBatch is how many entries of a directory WalkIn reads at a time.
const WalkBatch = 256

// WalkIn calls visit with each entry under root, by its slash path
// relative to root (never "." itself), directories before what they
// hold, in no order otherwise, and descends into a directory when visit
// says so. It never holds more of a directory than WalkBatch entries:
// each directory is opened through root as a directory (OpenDirIn: never
// through a link, nor a directory put in its place since it was listed)
// and read WalkBatch entries at a time, each handed to visit as it is
// read, so that a visit that counts entries refuses a directory of
// millions before they are all read; a directory is closed before the
// next is opened, the subdirectories to descend into queued by name. It
// stops at visit's first error, or ctx's, and returns it.
func WalkIn(ctx context.Context, root *os.Root, visit func(name string, d fs.DirEntry) (descend bool, err error)) error {
	queue := []string{"."}
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		subdirs, err := readBatched(ctx, root, dir, visit)
		if err != nil {
			return err
		}
		queue = append(queue, subdirs...)
	}
	return nil
}

// readBatched reads the directory dir under root WalkBatch entries at a
// time, calls visit with each, and returns the entries visit said to
// descend into.
func readBatched(ctx context.Context, root *os.Root, dir string, visit func(name string, d fs.DirEntry) (bool, error)) ([]string, error) {
	f, err := OpenDirIn(root, dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var subdirs []string
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		entries, err := f.ReadDir(WalkBatch)
		for _, d := range entries {
			name := path.Join(dir, d.Name())
			descend, err := visit(name, d)
			if err != nil {
				return nil, err
			}
			if descend {
				subdirs = append(subdirs, name)
			}
		}
		switch {
		case err == io.EOF:
			return subdirs, nil
		case err != nil:
			return nil, err
		}
	}
}
