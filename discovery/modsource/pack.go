package modsource

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
	"github.com/tfmirror/tfmirror/v2/internal/scratch"
)

// PackDir writes the module files under dir (a directory of the caller's,
// such as an in-house module to import) to dst as a normalized package,
// as Fetch writes a fetched one: PackRoot of dir.
func PackDir(ctx context.Context, dir, tempDir string, dst io.Writer, limits Limits) (Result, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Result{}, err
	}
	defer root.Close()
	return PackRoot(ctx, root, tempDir, dst, limits)
}

// PackRoot writes the module files under root to dst as a normalized
// package, as Fetch writes a fetched one, within limits: regular files,
// directories and links that stay inside root only; .git is left out, in
// every spelling of it (isDotGit), and refused past maxSkippedDotGit of
// them. Its directories are read inputfile.WalkBatch entries at a time,
// each entry charged to limits as it is read, so that a directory of more
// entries than limits allow is refused after reading at most one batch
// more, not read whole first; one directory is open at a time.
// Everything is read through root, so that nothing outside it is read
// whatever its links (or a file or directory made a link while it is
// read) point to. The files are copied into a directory it makes (and
// removes) in tempDir first, so that what is packed is what was checked.
func PackRoot(ctx context.Context, root *os.Root, tempDir string, dst io.Writer, limits Limits) (Result, error) {
	tmp, err := os.MkdirTemp(tempDir, scratch.Pattern(scratch.Module, "", ""))
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(tmp)
	b := &budget{limits: limits}
	tw, err := openTree(tmp, b)
	if err != nil {
		return Result{}, err
	}
	defer tw.w.Close()
	err = walkBatched(ctx, root, func(name string, d fs.DirEntry) (descend bool, err error) {
		switch {
		case d.IsDir():
			return true, tw.dir(name)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := root.Readlink(name)
			if err != nil {
				return false, err
			}
			return false, tw.symlink(name, filepath.ToSlash(target))
		case d.Type().IsRegular():
			// Not root.Open: a FIFO put in its place since the walk
			// listed it would block the open for ever.
			f, info, err := inputfile.OpenIn(root, name)
			if err != nil {
				return false, err
			}
			defer f.Close()
			return false, tw.file(name, info.Mode()&0o111 != 0, info.Size(), f)
		default:
			return false, fmt.Errorf("%s is not a file, directory or link", name)
		}
	})
	if err == nil {
		err = tw.finish()
	}
	if err != nil {
		return Result{}, err
	}
	files, tree, err := writeTarGz(tmp, tw.isExec, dst)
	return Result{Files: files, Tree: tree}, err
}

// maxSkippedDotGit bounds the entries spelled as .git (isDotGit) that
// PackRoot passes over: a Git checkout has one, and a tree of many is
// refused, for they are charged to no limit of the package's.
const maxSkippedDotGit = 64

// walkBatched walks root as inputfile.WalkIn does (a directory at a
// time, inputfile.WalkBatch entries at a time, never through a link),
// calling visit with each entry but the .git ones (isDotGit: passed
// over, a directory with all beneath it, at most maxSkippedDotGit of
// them).
func walkBatched(ctx context.Context, root *os.Root, visit func(name string, d fs.DirEntry) (descend bool, err error)) error {
	skipped := 0
	return inputfile.WalkIn(ctx, root, func(name string, d fs.DirEntry) (bool, error) {
		if isDotGit(d.Name()) {
			if skipped++; skipped > maxSkippedDotGit {
				return false, fmt.Errorf("more than %d entries named as .git (in any spelling), which a package leaves out: refused", maxSkippedDotGit)
			}
			return false, nil
		}
		return visit(name, d)
	})
}
