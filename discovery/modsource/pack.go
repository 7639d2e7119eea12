package modsource

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tfmirror/tfmirror/v2/internal/scratch"
)

// PackDir writes the module files under dir (a directory of the caller's,
// such as an in-house module to import) to dst as a normalized package,
// as Fetch writes a fetched one, within limits: regular files,
// directories and links that stay inside dir only; .git is left out.
// The files are copied into a directory it makes (and removes) in
// tempDir first, so that what is packed is what was checked.
func PackDir(ctx context.Context, dir, tempDir string, dst io.Writer, limits Limits) (Result, error) {
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
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		switch {
		case d.Name() == ".git":
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		case d.IsDir():
			return tw.dir(name)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return tw.symlink(name, filepath.ToSlash(target))
		case d.Type().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			info, err := f.Stat()
			if err != nil {
				return err
			}
			return tw.file(name, info.Mode()&0o111 != 0, info.Size(), f)
		default:
			return fmt.Errorf("%s is not a file, directory or link", name)
		}
	})
	if err == nil {
		err = tw.finish()
	}
	if err != nil {
		return Result{}, err
	}
	files, err := writeTarGz(tmp, dst)
	return Result{Files: files}, err
}
