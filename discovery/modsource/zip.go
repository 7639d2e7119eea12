package modsource

// A normalized package as a zip, for OCI module artifacts (OpenTofu's
// oci:// module sources unpack one archive/zip layer).

import (
	"archive/zip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tfmirror/tfmirror/v2/internal/safetree"
	"github.com/tfmirror/tfmirror/v2/internal/scratch"
)

// ErrLinkLoop matches a package that WriteZip refuses: a link to a
// directory that holds the link (or to one of the directories it is
// being copied into), which a zip without links would have to hold
// endlessly.
var ErrLinkLoop = errors.New("a link to a directory that contains it")

// WriteZip writes the package r holds (a tar.gz as Fetch writes it) to
// dst as a zip, a deterministic function of the package's files: the
// package is unpacked first, within limits, through Unpack (one
// safetree.Writer; a link that resolves outside the package refuses it),
// and its entries are written sorted by name in byte order, directories
// included (NAME/), stored uncompressed (so that the bytes depend on no
// compressor's version), with the modes of the tar.gz (0755 or 0644, as
// its headers say, whatever the disk keeps; directories 0755) and its
// fixed time.
//
// Zip has no portable links (OpenTofu's unpacker writes a link entry as
// a file holding its target), so links are resolved: a link to a file
// is written as a copy of that file, a link to a directory as a copy of
// that directory's entries, under the link's name. A link whose target
// does not exist is left out, and still counts against MaxEntries, as it
// did in the package, wherever a copy holds it. A link to a directory
// that contains it, or to a directory being copied, is refused with
// ErrLinkLoop. What the copies add counts against limits (MaxEntries,
// MaxTreeBytes) as the package's own entries do, and a copy may nest no
// name deeper or longer than a package's (safetree.MaxDepth,
// safetree.MaxNameBytes), with a *LimitError past them.
//
// The package is unpacked in a directory made (and removed) in tempDir.
func WriteZip(ctx context.Context, r io.Reader, dst io.Writer, tempDir string, limits Limits) (Result, error) {
	tmp, err := os.MkdirTemp(tempDir, scratch.Pattern(scratch.Module, "", ""))
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(tmp)
	exec, err := unpack(ctx, r, tmp, limits)
	if err != nil {
		return Result{}, err
	}
	z := &zipTree{ctx: ctx, b: &budget{limits: limits}, entries: map[string]zipEntry{}, exec: exec}
	if z.realTop, err = filepath.EvalSymlinks(tmp); err != nil {
		return Result{}, err
	}
	if z.root, err = os.OpenRoot(tmp); err != nil {
		return Result{}, err
	}
	defer z.root.Close()
	if err := z.walk(".", "", []string{"."}); err != nil {
		return Result{}, err
	}
	return z.write(dst)
}

// zipEntry is one entry of the zip: a directory, or a file read from
// source (a name in the unpacked tree, links resolved by the root).
type zipEntry struct {
	dir    bool
	exec   bool
	size   int64
	source string
}

// zipTree collects the zip's entries from the unpacked package.
type zipTree struct {
	ctx     context.Context
	root    *os.Root
	realTop string // the unpacked directory, links resolved
	b       *budget
	entries map[string]zipEntry // zip name -> entry
	// exec are the package's executable files, by name in the tree: as
	// the package says, not as the disk kept them.
	exec map[string]bool
}

// walk adds the entries of the directory dir (a name in the tree, links
// resolved) under the zip name prefix ("" for the top). copying are the
// real names of the directories being copied, dir's included.
func (z *zipTree) walk(dir, prefix string, copying []string) error {
	if err := z.ctx.Err(); err != nil {
		return err
	}
	f, err := z.root.Open(dir)
	if err != nil {
		return err
	}
	des, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, de := range des {
		name := path.Join(dir, de.Name())
		zipName := prefix + de.Name()
		switch {
		case de.Type()&fs.ModeSymlink != 0:
			if err := z.link(name, zipName, copying); err != nil {
				return err
			}
		case de.IsDir():
			if err := z.add(zipName+"/", zipEntry{dir: true}); err != nil {
				return err
			}
			if err := z.walk(name, zipName+"/", append(slices.Clone(copying), name)); err != nil {
				return err
			}
		case de.Type().IsRegular():
			info, err := de.Info()
			if err != nil {
				return err
			}
			if err := z.add(zipName, zipEntry{exec: z.exec[name], size: info.Size(), source: name}); err != nil {
				return err
			}
		}
	}
	return nil
}

// link adds what the link name (a name in the tree) resolves to, under
// zipName.
func (z *zipTree) link(name, zipName string, copying []string) error {
	info, err := z.root.Stat(name) // follows the link, inside the root only
	if errors.Is(err, fs.ErrNotExist) {
		// Left out, and still an entry walked: a directory of such links
		// copied under many links would cost their product, for nothing
		// the budget sees.
		return z.b.entry()
	}
	if err != nil {
		return fmt.Errorf("module package refused: the link %s: %w", zipName, err)
	}
	if !info.IsDir() && !info.Mode().IsRegular() {
		return z.b.entry()
	}
	// Its target's real name in the tree: Unpack made every link resolve
	// inside it.
	real, err := filepath.EvalSymlinks(filepath.Join(z.realTop, filepath.FromSlash(name)))
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(z.realTop, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("module package refused: the link %s resolves outside the package", zipName)
	}
	rel = filepath.ToSlash(rel)
	if !info.IsDir() {
		return z.add(zipName, zipEntry{exec: z.exec[rel], size: info.Size(), source: name})
	}
	for _, c := range copying {
		if rel == "." || c == rel || strings.HasPrefix(c, rel+"/") {
			return fmt.Errorf("module package refused: the link %s: %w", zipName, ErrLinkLoop)
		}
	}
	if err := z.add(zipName+"/", zipEntry{dir: true}); err != nil {
		return err
	}
	return z.walk(rel, zipName+"/", append(slices.Clone(copying), rel))
}

// add adds an entry, within the budget, and no deeper or longer than a
// package's names may be (safetree.MaxDepth, safetree.MaxNameBytes):
// links to directories copied into one another nest their copies, and
// the walk holds, for each level it is in, the directories being copied.
func (z *zipTree) add(zipName string, e zipEntry) error {
	name := strings.TrimSuffix(zipName, "/")
	if depth := strings.Count(name, "/") + 1; depth > safetree.MaxDepth || len(name) > safetree.MaxNameBytes {
		return &LimitError{Detail: fmt.Sprintf("its links to directories, copied into the zip, nest a name %d deep (%d bytes), more than the %d directories or %d bytes a name may take",
			depth, len(name), safetree.MaxDepth, safetree.MaxNameBytes)}
	}
	if err := z.b.entry(); err != nil {
		return err
	}
	if !e.dir {
		if err := z.b.file(e.size); err != nil {
			return err
		}
	}
	z.entries[zipName] = e
	return nil
}

// write writes the entries, sorted, to dst.
func (z *zipTree) write(dst io.Writer) (Result, error) {
	names := make([]string, 0, len(z.entries))
	for n := range z.entries {
		names = append(names, n)
	}
	slices.Sort(names)
	zw := zip.NewWriter(dst)
	files := 0
	for _, n := range names {
		if err := z.ctx.Err(); err != nil {
			return Result{}, err
		}
		e := z.entries[n]
		h := &zip.FileHeader{Name: n, Method: zip.Store, Modified: fixedTime}
		switch {
		case e.dir:
			h.SetMode(fs.ModeDir | 0o755)
		case e.exec:
			h.SetMode(0o755)
		default:
			h.SetMode(0o644)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			return Result{}, err
		}
		if e.dir {
			continue
		}
		f, err := z.root.Open(e.source)
		if err != nil {
			return Result{}, err
		}
		n, err := io.Copy(w, io.LimitReader(f, e.size+1))
		f.Close()
		if err == nil && n != e.size {
			err = fmt.Errorf("the package's file %s changed while it was written", e.source)
		}
		if err != nil {
			return Result{}, err
		}
		files++
	}
	return Result{Files: files}, zw.Close()
}
