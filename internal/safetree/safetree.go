// Package safetree writes trees that come from outside (module archives,
// Git trees and their submodules, module packages, import bundles) into a
// directory. It is the only code of tfmirror that writes such a tree, so
// that every kind of source inherits what it promises:
//
//   - Everything is written through an os.Root opened on the directory,
//     which refuses to reach outside it, whatever is already on disk.
//   - Names are slash-separated paths inside the directory (a backslash
//     separates too, as it does on Windows, where clients unpack what
//     tfmirror serves). A name is cleaned lexically; one that is empty,
//     absolute, climbs out (".."), is not UTF-8 (which the tree could
//     not be walked again with, io/fs) or holds a control character
//     (which a terminal showing it would obey) is refused. What a caller leaves out
//     (Git's .git) it leaves out before it calls. A name nested deeper
//     than MaxDepth or longer than MaxNameBytes is refused before
//     anything of it is made: os.Root walks a name one directory at a
//     time, so a name of d directories costs in the order of d² system
//     calls, and a tar file's extended header lets a name be a megabyte.
//     So is one with a directory or file name longer than
//     MaxComponentBytes, which the system would refuse with its own
//     error, a failure of the disk's rather than of the tree.
//   - Nothing is written through a link: an entry whose parent path holds
//     a link (given to this Writer, or found on disk) or a file is
//     refused.
//   - Links are not created when given. They are recorded and created by
//     Finish, after every file and directory, and only when every link
//     resolves inside the directory: a target that is absolute, that
//     climbs out from where the link really is, or that goes through a
//     chain of links ending outside, or a loop of links, refuses them all
//     and none is created; so does one that leads outside on a file
//     system that compares names without case (CheckLinks). After creating them Finish walks the result and
//     checks every link in it again.
//   - The later entry of a name wins, as when an archive is unpacked: a
//     file or a link replaces a file or a link of the same name, removing
//     the name itself, never what a link points to. A directory is never
//     replaced: a file or a link at a directory's name, or a directory at
//     a file's or a link's name, is refused. With Options.NoReplace a
//     second file or link of one name is refused as well.
//   - Files are written 0644, or 0755 when any execute bit of their mode
//     is set; directories 0755 (less the process's umask).
//
// It bounds nothing but names and what it holds per link: callers count
// entries and bytes (each has its own limits) before they call, and the
// directories an entry implies that no entry names through
// Options.ImpliedDir.
package safetree

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"unicode/utf8"
)

// ErrUnsafe matches every entry refused because it would reach outside
// the directory or write through a link.
var ErrUnsafe = errors.New("unsafe tree entry")

// Options change what a Writer accepts.
type Options struct {
	// NoReplace refuses a file or a link whose name was already written,
	// with an error matching fs.ErrExist. Default: the later entry wins.
	NoReplace bool
	// ImpliedDir, when not nil, is asked before the Writer makes a
	// directory that no entry named, because an entry lies under it; an
	// error refuses the entry, and nothing more of it is made. Callers
	// count such a directory as an entry (and its room on disk): without
	// it, one entry could make MaxDepth directories.
	ImpliedDir func(name string) error
}

// Bounds on a name, whatever the caller's limits.
const (
	// MaxDepth is the most directories and file a name may have: deeper
	// than any module or bundle is laid out (a client on Windows cannot
	// make a path of more than 260 characters, without its long paths).
	MaxDepth = 64
	// MaxNameBytes is the longest name taken, a system's PATH_MAX.
	MaxNameBytes = 4096
	// MaxComponentBytes is the longest directory or file name within a
	// name, a system's NAME_MAX (Linux's, in bytes; macOS and Windows
	// take 255 characters).
	MaxComponentBytes = 255
)

// Writer writes one tree under a directory. Its methods are not safe for
// concurrent use.
type Writer struct {
	root  *os.Root
	opts  Options
	dirs  map[string]bool   // directories known to be real ones
	links map[string]string // links to create: name -> target
	done  bool
}

// Open returns a Writer of the tree under dir, an existing directory.
// Close it.
func Open(dir string, opts Options) (*Writer, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &Writer{root: root, opts: opts, dirs: map[string]bool{}, links: map[string]string{}}, nil
}

// Close releases the directory. Links not yet created by Finish never
// are.
func (w *Writer) Close() error { return w.root.Close() }

// CleanName returns name cleaned as a Writer cleans it: slash-separated,
// without "." and ".." components; "" is the directory itself. A name that
// is absolute, climbs out of the directory, is not UTF-8 or holds a
// control character is refused.
func CleanName(name string) (string, error) {
	if !utf8.ValidString(name) {
		return "", fmt.Errorf("%w: the name %q is not UTF-8", ErrUnsafe, name)
	}
	if strings.ContainsFunc(name, isControl) {
		return "", fmt.Errorf("%w: the name %q holds a control character", ErrUnsafe, name)
	}
	if len(name) > MaxNameBytes {
		return "", fmt.Errorf("%w: a name of %d bytes, more than the %d taken", ErrUnsafe, len(name), MaxNameBytes)
	}
	n := strings.ReplaceAll(name, `\`, "/")
	if strings.HasPrefix(n, "/") || hasVolume(n) {
		return "", fmt.Errorf("%w: the name %q is absolute", ErrUnsafe, name)
	}
	n = path.Clean(n)
	if n == ".." || strings.HasPrefix(n, "../") {
		return "", fmt.Errorf("%w: the name %q climbs out of the tree", ErrUnsafe, name)
	}
	if n == "." {
		return "", nil
	}
	if depth := strings.Count(n, "/") + 1; depth > MaxDepth {
		return "", fmt.Errorf("%w: the name %.64q... is nested %d deep, more than the %d taken", ErrUnsafe, name, depth, MaxDepth)
	}
	for part := range strings.SplitSeq(n, "/") {
		if len(part) > MaxComponentBytes {
			return "", fmt.Errorf("%w: the name %.64q... holds a directory or file name of %d bytes, more than the %d taken", ErrUnsafe, name, len(part), MaxComponentBytes)
		}
	}
	return n, nil
}

// isControl reports whether r is a control character (C0, DEL, C1): in a
// name, a terminal that shows it (a file name in an error) takes it for
// a command (an escape sequence sets its title, or its clipboard), Git
// refuses it in a tree, and Windows cannot make it.
func isControl(r rune) bool { return r < 0x20 || r >= 0x7f && r <= 0x9f }

// hasVolume reports whether p starts with a Windows drive ("C:").
func hasVolume(p string) bool {
	return len(p) >= 2 && p[1] == ':' && ('a' <= p[0]|0x20 && p[0]|0x20 <= 'z')
}

// entry cleans name and makes sure every directory above it is a real
// directory of the tree (making those that are missing), refusing a
// name under a link or a file.
func (w *Writer) entry(name string) (string, error) {
	n, err := CleanName(name)
	if err != nil {
		return "", err
	}
	for i := 0; i < len(n); i++ {
		if n[i] != '/' {
			continue
		}
		parent := n[:i]
		if w.dirs[parent] {
			continue
		}
		if _, ok := w.links[parent]; ok {
			return "", fmt.Errorf("%w: the entry %q lies under the link %q", ErrUnsafe, name, parent)
		}
		fi, err := w.root.Lstat(parent)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if w.opts.ImpliedDir != nil {
				if err := w.opts.ImpliedDir(parent); err != nil {
					return "", err
				}
			}
			if err := w.root.Mkdir(parent, 0o755); err != nil {
				return "", err
			}
		case err != nil:
			return "", err
		case fi.Mode()&fs.ModeSymlink != 0:
			return "", fmt.Errorf("%w: the entry %q lies under the link %q", ErrUnsafe, name, parent)
		case !fi.IsDir():
			return "", fmt.Errorf("%w: the entry %q lies under the file %q", ErrUnsafe, name, parent)
		}
		w.dirs[parent] = true
	}
	return n, nil
}

// existing says what is at n already: a directory, or another entry (a
// file or a link, created or still to be), or nothing.
func (w *Writer) existing(n string) (dir, other bool, err error) {
	if w.dirs[n] {
		return true, false, nil
	}
	if _, ok := w.links[n]; ok {
		return false, true, nil
	}
	fi, err := w.root.Lstat(n)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, false, nil
	case err != nil:
		return false, false, err
	}
	return fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0, !fi.IsDir() || fi.Mode()&fs.ModeSymlink != 0, nil
}

// replace makes room for a file or a link at n (the cleaned name of
// name): it refuses a directory there, and removes a file or a link
// (the name itself) unless Options.NoReplace refuses it.
func (w *Writer) replace(name, n string) error {
	dir, other, err := w.existing(n)
	switch {
	case err != nil:
		return err
	case dir:
		return fmt.Errorf("%w: the entry %q is a directory already", ErrUnsafe, name)
	case !other:
		return nil
	case w.opts.NoReplace:
		return fmt.Errorf("the entry %q is in the tree twice: %w", name, fs.ErrExist)
	}
	delete(w.links, n)
	if err := w.root.Remove(n); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Dir makes the directory name (and those above it). A directory given
// twice is made once; the tree's own directory ("" or ".") is there.
func (w *Writer) Dir(name string) error {
	n, err := w.entry(name)
	if err != nil || n == "" {
		return err
	}
	dir, other, err := w.existing(n)
	switch {
	case err != nil:
		return err
	case other:
		return fmt.Errorf("%w: the directory %q has the name of a file or link", ErrUnsafe, name)
	case !dir:
		if err := w.root.Mkdir(n, 0o755); err != nil {
			return err
		}
	}
	w.dirs[n] = true
	return nil
}

// File writes the file name of size bytes read from r, which must give
// that many (fewer fail; more are not read), 0755 when perm has an
// execute bit, else 0644.
func (w *Writer) File(name string, perm fs.FileMode, size int64, r io.Reader) error {
	if size < 0 {
		return fmt.Errorf("the entry %q has a negative size", name)
	}
	n, err := w.entry(name)
	if err != nil {
		return err
	}
	if n == "" {
		return fmt.Errorf("%w: the file %q would be the tree itself", ErrUnsafe, name)
	}
	if err := w.replace(name, n); err != nil {
		return err
	}
	mode := fs.FileMode(0o644)
	if perm&0o111 != 0 {
		mode = 0o755
	}
	// O_EXCL: never opened through a link that would be there.
	out, err := w.root.OpenFile(n, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	written, err := io.Copy(out, io.LimitReader(r, size))
	if err == nil && written < size {
		err = fmt.Errorf("the entry %q ends after %d of its %d bytes", name, written, size)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// maxTarget is the longest link target taken: a system's PATH_MAX, less
// the NUL that ends it (Linux refuses a longer one).
const maxTarget = 4095

// Symlink records the link name to target, created by Finish. A target
// that is empty, absolute or too long is refused at once; where it
// leads is checked by Finish.
func (w *Writer) Symlink(name, target string) error {
	n, err := w.entry(name)
	if err != nil {
		return err
	}
	if n == "" {
		return fmt.Errorf("%w: the link %q would be the tree itself", ErrUnsafe, name)
	}
	if err := checkTarget(name, target); err != nil {
		return err
	}
	if err := w.replace(name, n); err != nil {
		return err
	}
	w.links[n] = target
	return nil
}

func checkTarget(name, target string) error {
	switch t := strings.ReplaceAll(target, `\`, "/"); {
	case target == "":
		return fmt.Errorf("%w: the link %q has no target", ErrUnsafe, name)
	case len(target) > maxTarget:
		return fmt.Errorf("%w: the link %q has a target longer than %d bytes", ErrUnsafe, name, maxTarget)
	case strings.HasPrefix(t, "/") || hasVolume(t):
		return fmt.Errorf("%w: the link %q points outside the tree (%q, absolute)", ErrUnsafe, name, target)
	case strings.ContainsRune(target, 0):
		return fmt.Errorf("%w: the link %q has a NUL in its target", ErrUnsafe, name)
	}
	return nil
}

// Finish creates the links recorded, once every one is known to resolve
// inside the tree, then walks the tree and checks every link in it
// again; when that fails, it removes the links it created. A Writer is
// done once Finish is called: later entries are not written.
func (w *Writer) Finish() error {
	if w.done {
		return errors.New("safetree: Finish called twice")
	}
	w.done = true
	if err := CheckLinks(w.links); err != nil {
		return err
	}
	created := make([]string, 0, len(w.links))
	for _, n := range slices.Sorted(mapKeys(w.links)) {
		if err := w.root.Symlink(w.links[n], n); err != nil {
			w.remove(created)
			return err
		}
		created = append(created, n)
	}
	onDisk, err := Links(w.root.FS(), 0)
	if err == nil {
		err = CheckLinks(onDisk)
	}
	if err != nil {
		w.remove(created)
		return err
	}
	return nil
}

func (w *Writer) remove(names []string) {
	for _, n := range names {
		w.root.Remove(n) //nolint:errcheck // best effort: the caller removes the tree
	}
}

// Links returns the links in fsys (name -> target), without following
// any; max > 0 bounds how many entries it reads before giving up.
func Links(fsys fs.FS, max int) (map[string]string, error) {
	links := map[string]string{}
	seen := 0
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		seen++
		if max > 0 && seen > max {
			return fmt.Errorf("more than %d entries", max)
		}
		if d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		t, err := fs.ReadLink(fsys, p)
		if err != nil {
			return err
		}
		links[p] = t
		return nil
	})
	return links, err
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
