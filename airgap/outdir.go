package airgap

// The directory an export writes. An output directory may have come back
// from the other side of the air gap (the medium an earlier export was
// carried on), and what is in it is a stranger's: a link in it, to a
// directory or a file, could lead the export's writes, its withdrawals
// and its reads of what is there already anywhere the mirror's user may
// write or read. So the directory export and the OCI layout export open
// OUT once, as an *os.Root, and every read, write, rename and removal
// under it goes through outDir, by OUT-relative names: the root keeps
// each of them inside OUT, whatever links are in it or come to be.
// Within OUT, outDir follows no link either:
//
//   - a link where the export needs a directory (a provider's host,
//     namespace or type, modules/..., releases/..., an OCI repository
//     and its blobs/) is refused, an *outLinkError naming it: the
//     version that needs it fails, and is reported;
//   - a link where the export writes a file (an archive, evidence,
//     index.json, the manifest) is replaced by the file, as the file
//     there would be: the rename of the written file takes its name, and
//     what the link leads to is neither read nor changed;
//   - a link where the export reads a file it keeps (an archive an
//     earlier export wrote, that export's evidence, a CLI version's
//     record, the earlier manifest) is not read: the file counts as not
//     there, and is written again, or left out of the signed manifest
//     and reported;
//   - withdrawing a version removes regular files only, never through a
//     link; a link in the way of its directory stops the export, named.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
	"github.com/tfmirror/tfmirror/v2/internal/safetree"
	"github.com/tfmirror/tfmirror/v2/mirror"
)

// outDir is OUT, the directory an export writes, opened as a root. Its
// methods take the paths the export builds (OUT joined with names) and
// act on their OUT-relative names through the root; their errors name
// the paths under OUT.
type outDir struct {
	root *os.Root
	path string // OUT, as messages show it
	// sync makes a file's or a directory's contents durable
	// ((*os.File).Sync); tests watch it.
	sync func(*os.File) error
	// maxEntries bounds the entries walk looks at: maxOutEntries; tests
	// make it smaller.
	maxEntries int
	// maxFileBytes bounds the files sha256Size reads: no file an export
	// writes, or keeps of an earlier one, is larger than the largest
	// the cache holds (maxKeptBytes, which the export sets), and one of
	// OUT's that is (a sparse file of terabytes in place of an archive)
	// is not the file, whatever its bytes: it is not read.
	maxFileBytes int64

	mu    sync.Mutex
	dirty map[string]bool // OUT-relative directories written into since the last syncDirs
	above []string        // directories outside OUT that openOutDir made a directory in, not yet synced

	release func() // gives OUT back for other exports (claimOut)
	// lock is OUT opened through the root, holding OUT's lock
	// (lockExport) until Close, nil when it holds none.
	lock *os.File
	// locked: OUT's lock is held, by lock or by the caller, so what is
	// in OUT is no other export's.
	locked bool
}

// outLinkError refuses a link in OUT where an export needs a directory,
// or would read a file.
type outLinkError struct{ path string }

func (e *outLinkError) Error() string {
	return e.path + " is a symbolic link: an export writes into its directory only, and follows no link in it (remove the link, or export into another directory)"
}

// openOutDir makes the directory path (mode 0755) unless it is there,
// and opens it as the root of an export. A link at path itself is
// followed: the operator named it. It takes OUT's lock (lockExport) for
// the export, unless locked says the caller holds it (a tar file's
// working directory, makeTarTemp's): an export of another process
// writing into OUT is refused, an *outInUseError. Where the file system
// has no such lock, the export goes on without it, as where there are
// none (exportLocks).
func openOutDir(path string, locked bool) (*outDir, error) {
	path = filepath.Clean(path)
	// The directories above those MkdirAll makes (OUT among them): each
	// holds a new name.
	var above []string
	for p := path; ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) || filepath.Dir(p) == p {
			break
		}
		above = append(above, filepath.Dir(p))
	}
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, err
	}
	release, err := claimOut(path)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(path)
	if err != nil {
		release()
		return nil, err
	}
	o := &outDir{root: root, path: path, sync: (*os.File).Sync, maxEntries: maxOutEntries, dirty: map[string]bool{}, above: above, release: release, locked: locked && exportLocks,
		maxFileBytes: math.MaxInt64 - 1} // until the export sets its cache's (maxKeptBytes)
	if !locked {
		o.lock, err = root.Open(".")
		if err == nil {
			if err = lockExport(o.lock); err != nil {
				o.lock.Close()
				o.lock = nil
			}
		}
		switch {
		case errors.Is(err, errExportLocked):
			o.Close()
			return nil, &outInUseError{path: path}
		case err != nil:
			// No lock on this file system: none is held.
		default:
			o.locked = exportLocks
		}
	}
	return o, nil
}

// outsInUse are the directories exports of this process write, by
// absolute path, links followed: two exports into one directory at once (two
// `tfmirror export` through one serve) would each write index.json and
// the manifest from what it read before the other wrote, losing the
// other's tags and files.
var outsInUse sync.Map // string -> struct{}

// ErrOutInUse is an export into a directory another export, of this
// process or (where there are locks, exportLocks) of another, is
// writing: errors.Is finds it in an *outInUseError.
var ErrOutInUse = errors.New("another export is writing into this directory; wait for it to finish, or export elsewhere")

// outInUseError refuses an export into path, which another export is
// writing.
type outInUseError struct{ path string }

func (e *outInUseError) Error() string {
	return "another export is writing into " + e.path + "; wait for it to finish, or export elsewhere"
}

func (e *outInUseError) Is(target error) bool { return target == ErrOutInUse }

// claimOut claims the directory path, which is there, for one export;
// release gives it back. The directory is claimed under the name it has
// once links are followed, whatever name it was given.
func claimOut(path string) (release func(), err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return nil, err
	}
	if _, busy := outsInUse.LoadOrStore(abs, struct{}{}); busy {
		return nil, &outInUseError{path: path}
	}
	var once sync.Once
	return func() { once.Do(func() { outsInUse.Delete(abs) }) }, nil
}

func (o *outDir) Close() error {
	defer o.release()
	if o.lock != nil {
		defer o.lock.Close()
	}
	return o.root.Close()
}

// name is the OUT-relative name of path, a path under OUT; "." for OUT.
func (o *outDir) name(path string) (string, error) {
	rel, err := filepath.Rel(o.path, filepath.Clean(path))
	if err != nil || rel != "." && !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%s is not in the export's directory %s", path, o.path)
	}
	return rel, nil
}

// shown is the path under OUT of the OUT-relative name.
func (o *outDir) shown(name string) string {
	return filepath.Join(o.path, name)
}

// shownErr makes the OUT-relative names in err (the root's) paths under
// OUT, as the messages of the path-based calls named them.
func (o *outDir) shownErr(err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	var ke *inputfile.KindError
	switch {
	case errors.As(err, &ke) && !filepath.IsAbs(ke.Path):
		if ke.Kind == inputfile.Kind(fs.ModeSymlink) {
			return &outLinkError{path: o.shown(ke.Path)}
		}
		ke.Path = o.shown(ke.Path)
	case errors.As(err, &pe) && !filepath.IsAbs(pe.Path):
		pe.Path = o.shown(pe.Path)
	case errors.As(err, &le) && !filepath.IsAbs(le.New):
		le.Old, le.New = o.shown(le.Old), o.shown(le.New)
	}
	return err
}

// dirs checks that name (OUT-relative) and every directory above it in
// OUT is a directory, no link, making those that are not there (mode
// 0755) when create.
func (o *outDir) dirs(name string, create bool) error {
	if name == "." {
		return nil
	}
	parts := strings.Split(name, string(filepath.Separator))
	for i := range parts {
		p := filepath.Join(parts[:i+1]...)
		info, err := o.root.Lstat(p)
		if create && errors.Is(err, fs.ErrNotExist) {
			err = o.root.Mkdir(p, 0o755)
			if err == nil {
				// A new name in the directory above: durable once
				// that one is synced (syncDirs).
				o.mu.Lock()
				o.dirty[filepath.Dir(p)] = true
				o.mu.Unlock()
			}
			if err == nil || errors.Is(err, fs.ErrExist) {
				info, err = o.root.Lstat(p)
			}
		}
		switch {
		case err != nil:
			return o.shownErr(err)
		case info.Mode()&fs.ModeSymlink != 0:
			return &outLinkError{path: o.shown(p)}
		case !info.IsDir():
			return fmt.Errorf("%s is not a directory", o.shown(p))
		}
	}
	return nil
}

// mkdirAll makes the directory path under OUT and those above it (mode
// 0755) unless they are there; a link on the way is refused.
func (o *outDir) mkdirAll(path string) error {
	name, err := o.name(path)
	if err != nil {
		return err
	}
	return o.dirs(name, true)
}

// open opens the regular file at path under OUT for reading, through no
// link: a link on the way, or at path, is refused.
func (o *outDir) open(path string) (*os.File, fs.FileInfo, error) {
	name, err := o.name(path)
	if err != nil {
		return nil, nil, err
	}
	if err := o.dirs(filepath.Dir(name), false); err != nil {
		return nil, nil, err
	}
	f, info, err := inputfile.OpenIn(o.root, name)
	if err != nil {
		return nil, nil, o.shownErr(err)
	}
	return f, info, nil
}

// exists reports whether there is something at path under OUT, with no
// link on the way to it.
func (o *outDir) exists(path string) bool {
	name, err := o.name(path)
	if err != nil || o.dirs(filepath.Dir(name), false) != nil {
		return false
	}
	_, err = o.root.Lstat(name)
	return err == nil
}

// readCapped reads the regular file at path under OUT (open), failing
// when it is larger than limit.
func (o *outDir) readCapped(path string, limit int64) ([]byte, error) {
	f, _, err := o.open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAllCapped(f, path, limit)
}

// sha256Size returns the sha256 and size of the regular file at path
// under OUT (open).
func (o *outDir) sha256Size(path string) (string, int64, error) {
	f, info, err := o.open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	if info.Size() > o.maxFileBytes {
		return "", 0, fmt.Errorf("%s is %d bytes, more than any file an export keeps (%d)", path, info.Size(), o.maxFileBytes)
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, o.maxFileBytes+1))
	if err != nil {
		return "", 0, err
	}
	if n > o.maxFileBytes {
		return "", 0, fmt.Errorf("%s grew past %d bytes, more than any file an export keeps", path, o.maxFileBytes)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// maxKeptBytes is the most bytes a file an export of the cache of cfg
// writes or keeps may have: the largest archive or module package the
// cache holds (outDir.maxFileBytes).
func maxKeptBytes(cfg mirror.Config) int64 {
	return max(cfg.MaxArchiveBytes, modsource.MaxPackageBytes(cfg.ModuleLimits))
}

// readDir lists the directory at path under OUT, reached through no
// link; the entries' types are their own (a link is a link).
func (o *outDir) readDir(path string) ([]fs.DirEntry, error) {
	name, err := o.name(path)
	if err != nil {
		return nil, err
	}
	if err := o.dirs(name, false); err != nil {
		return nil, err
	}
	f, err := inputfile.OpenDirIn(o.root, name)
	if err != nil {
		return nil, o.shownErr(err)
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	return entries, o.shownErr(err)
}

// remove removes the file at path under OUT (a link there is removed
// itself, not what it leads to); the next syncDirs makes it durable.
func (o *outDir) remove(path string) error {
	name, err := o.name(path)
	if err != nil {
		return err
	}
	dir := filepath.Dir(name)
	if err := o.dirs(dir, false); err != nil {
		return err
	}
	if err := o.root.Remove(name); err != nil {
		return o.shownErr(err)
	}
	o.mu.Lock()
	o.dirty[dir] = true
	o.mu.Unlock()
	return nil
}

// write writes the file at path under OUT (its directory there already,
// reached through no link) with mode perm, through a temporary file
// beside it that fill writes and that is then renamed to path: whatever
// was at path (a link included, which is not followed) is replaced
// whole, or left as it was.
func (o *outDir) write(path string, perm fs.FileMode, fill func(io.Writer) error) error {
	name, err := o.name(path)
	if err != nil {
		return err
	}
	dir := filepath.Dir(name)
	if err := o.dirs(dir, false); err != nil {
		return err
	}
	var tmp string
	var f *os.File
	for range 100 {
		tmp = filepath.Join(dir, tempPrefix+rand.Text())
		f, err = o.root.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return o.shownErr(err)
	}
	defer o.root.Remove(tmp)
	err = fill(f)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		// On disk before it takes its name: an export is often carried
		// on a medium pulled out as soon as it says it is done.
		err = o.sync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return o.shownErr(err)
	}
	if err := o.root.Rename(tmp, name); err != nil {
		return o.shownErr(err)
	}
	o.mu.Lock()
	o.dirty[dir] = true
	o.mu.Unlock()
	return nil
}

// syncDirs makes the names written since its last call durable: it syncs
// each directory write renamed a file into or dirs made a directory in
// (the directories above a new OUT included). An export calls it before it
// writes what says the export is whole (the signed manifest, push.sh),
// and after, so that a power loss or a medium pulled out never leaves a
// manifest naming a file that is not there whole.
func (o *outDir) syncDirs() error {
	o.mu.Lock()
	dirs := make([]string, 0, len(o.dirty))
	for d := range o.dirty {
		dirs = append(dirs, d)
	}
	clear(o.dirty)
	above := o.above
	o.above = nil
	o.mu.Unlock()
	slices.Sort(dirs)
	syncOpened := func(f *os.File, err error, shown string) error {
		if err != nil {
			return err
		}
		defer f.Close()
		if err := o.sync(f); err != nil {
			return fmt.Errorf("syncing %s: %w", shown, err)
		}
		return nil
	}
	for _, d := range above {
		// Outside OUT: named by the operator's path, not through the root.
		f, err := os.Open(d)
		if err := syncOpened(f, err, d); err != nil {
			return err
		}
	}
	for _, d := range dirs {
		f, err := o.root.Open(d)
		if err := syncOpened(f, o.shownErr(err), o.shown(d)); err != nil {
			return err
		}
	}
	return nil
}

// writeIfChanged writes data to path under OUT with mode perm (write),
// unless path is a regular file holding data already, which it leaves as
// it is. It reports whether it wrote.
func (o *outDir) writeIfChanged(path string, data []byte, perm fs.FileMode) (bool, error) {
	if f, _, err := o.open(path); err == nil {
		old, rerr := readAllCapped(f, path, int64(len(data)))
		f.Close()
		if rerr == nil && string(old) == string(data) {
			return false, nil
		}
	}
	return true, o.write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// chmod sets the mode of the regular file at path under OUT to perm: a
// link there, or on the way, is refused.
func (o *outDir) chmod(path string, perm fs.FileMode) error {
	f, _, err := o.open(path)
	if err != nil {
		return err
	}
	f.Close()
	name, err := o.name(path)
	if err != nil {
		return err
	}
	return o.shownErr(o.root.Chmod(name, perm))
}

// tempPrefix begins the names of write's temporary files, which go on
// with rand.Text()'s 26 letters and digits of base32.
const tempPrefix = ".tmp-"

// staleTempAge is how long a temporary file of write's must have gone
// unwritten for removeStaleTemps to take it for one an export killed
// while it wrote left behind where OUT's lock is not held (no locks
// here, exportLocks, or on OUT's file system): an export writes its
// files without pause, and one of another process writing into OUT is
// left alone. With the lock held, no other export writes into OUT, and
// every temporary file there is a killed one's.
const staleTempAge = time.Hour

// removeStaleTemps removes the temporary files of write's that an
// export killed while it wrote left in OUT (none is renamed to its name
// once the export is gone), so that an export into OUT after one that was
// killed neither carries them nor lists them as left out of its signed
// manifest, as every export after would. It returns the paths removed.
// It does not look into a tar file's working directory in OUT (an
// export into OUT/NAME.tar, which holds that directory's own lock).
func (o *outDir) removeStaleTemps() ([]string, error) {
	var removed []string
	err := o.walk(func(path string, d fs.DirEntry) error {
		if d.IsDir() && path != o.path && isTarTempName(d.Name()) {
			// A tar file's working directory: its own export's, which
			// holds its own lock, and removes it (removeStaleTarTemps).
			return fs.SkipDir
		}
		if !isStaleTemp(d, o.locked) {
			return nil
		}
		if err := o.remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		removed = append(removed, path)
		return nil
	})
	return removed, err
}

// removeStaleTempsReporting is removeStaleTemps, reporting each file it
// removed.
func (o *outDir) removeStaleTempsReporting(report func(string)) error {
	removed, err := o.removeStaleTemps()
	for _, path := range removed {
		report(fmt.Sprintf("%s: removed, a temporary file of an export killed while it wrote", path))
	}
	return err
}

// isStaleTemp says d is a regular file named as write names its
// temporary files that was last written more than staleTempAge ago, or
// at any time when locked (OUT's lock is held).
func isStaleTemp(d fs.DirEntry, locked bool) bool {
	rest, ok := strings.CutPrefix(d.Name(), tempPrefix)
	if !ok || !isRandText(rest) || !d.Type().IsRegular() {
		return false
	}
	if locked {
		return true
	}
	info, err := d.Info()
	return err == nil && time.Since(info.ModTime()) > staleTempAge
}

// isRandText says s is as rand.Text() makes the names of an export's
// temporary files and directories: 26 characters of base32.
func isRandText(s string) bool {
	return len(s) == 26 && strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") == ""
}

// tarTempPrefix begins the names of what an export into a tar file
// writes beside it before the tar file takes its name: its working
// directory (tarTempPrefix and 26 base32 characters) and the tar file
// being written (the same, and ".tar").
const tarTempPrefix = ".tfmirror-export-"

// removeStaleTarTemps removes, in dir, what an export into a tar file
// there that was killed while it wrote left beside it (tarTempPrefix):
// at once when no export holds its lock, or once nothing in it was
// written for staleTempAge where that cannot be told (tarTempDead); and
// reports each. An export of another process, writing, is left alone,
// and so is an entry named otherwise (an earlier release named its
// working directory and tar file by os.MkdirTemp and os.CreateTemp's
// digits instead: those are taken too).
func removeStaleTarTemps(dir string, report func(string)) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	entries, err := fs.ReadDir(root.FS(), ".")
	if err != nil {
		return err
	}
	for _, d := range entries {
		if !isTarTempName(d.Name()) || !(d.IsDir() || d.Type().IsRegular()) {
			continue
		}
		unlock, dead, err := tarTempDead(root, d.Name())
		if err != nil || !dead {
			continue // gone meanwhile, or being written
		}
		err = root.RemoveAll(d.Name())
		unlock()
		if err != nil {
			return fmt.Errorf("removing %s, left by an export killed while it wrote: %w", filepath.Join(dir, d.Name()), err)
		}
		report(fmt.Sprintf("%s: removed, left by an export into a tar file killed while it wrote", filepath.Join(dir, d.Name())))
	}
	return nil
}

// isTarTempName says name is one an export into a tar file writes
// beside it (tarTempPrefix), of this release or an earlier one.
func isTarTempName(name string) bool {
	rest, ok := strings.CutPrefix(name, tarTempPrefix)
	if !ok {
		return false
	}
	rest = strings.TrimSuffix(rest, ".tar")
	base32 := isRandText(rest)
	digits := len(rest) >= 1 && len(rest) <= 10 && strings.Trim(rest, "0123456789") == ""
	return base32 || digits
}

// writtenSince says whether name in root, or anything under it, was
// last written after t. Links are not followed. A directory under name
// is read as OUT is (inputfile.WalkIn): one nested deeper than
// safetree.MaxDepth is not looked into, nor is anything past
// maxOutEntries entries: either counts as written since (so what holds
// it is left where it is).
func writtenSince(root *os.Root, name string, t time.Time) (bool, error) {
	info, err := root.Lstat(name)
	switch {
	case err != nil:
		return false, err
	case info.ModTime().After(t):
		return true, nil
	case !info.IsDir():
		return false, nil
	}
	sub, err := root.OpenRoot(name)
	if err != nil {
		return false, err
	}
	defer sub.Close()
	seen := 0
	err = inputfile.WalkIn(context.Background(), sub, func(p string, d fs.DirEntry) (bool, error) {
		if seen++; seen > maxOutEntries || d.IsDir() && tooDeep(p) {
			return false, fs.SkipAll // too much to tell: written since
		}
		info, err := d.Info()
		if err != nil {
			return false, err
		}
		if info.ModTime().After(t) {
			return false, fs.SkipAll
		}
		return d.IsDir(), nil
	})
	if errors.Is(err, fs.SkipAll) {
		return true, nil
	}
	return false, err
}

// maxOutEntries bounds the entries an export looks at in OUT: four
// times what an import takes of a bundle (DefaultMaxEntries), far more
// than an export writes, and few enough to hold their paths.
const maxOutEntries = 4 * DefaultMaxEntries

// walk calls fn with each entry under OUT (not OUT itself), by its path
// under OUT, directories before what they hold, in no order otherwise,
// reading through the root a directory at a time, a batch of entries at
// a time (inputfile.WalkIn): a link is an entry of its own, never
// followed. fn returning fs.SkipDir for a directory passes over what it
// holds; any other error ends the walk with it. A directory nested
// deeper than safetree.MaxDepth (deeper than any export writes, or any
// import takes), or more than maxEntries entries, end the walk with
// an error that names where, before anything beneath or beyond is read:
// OUT is not an export's directory, and the walk does not go on down or
// through whatever it holds.
func (o *outDir) walk(fn func(path string, d fs.DirEntry) error) error {
	seen := 0
	err := inputfile.WalkIn(context.Background(), o.root, func(name string, d fs.DirEntry) (bool, error) {
		shown := o.shown(filepath.FromSlash(name))
		if seen++; seen > o.maxEntries {
			return false, fmt.Errorf("%s: more than %d entries in the export directory %s, more than an export writes: not an export's; export into another directory", shown, o.maxEntries, o.path)
		}
		if d.IsDir() && tooDeep(name) {
			return false, fmt.Errorf("%s: directories nested more than %d deep in the export directory, deeper than an export writes: not an export's; remove them, or export into another directory", shown, safetree.MaxDepth)
		}
		switch err := fn(shown, d); {
		case errors.Is(err, fs.SkipDir) && d.IsDir():
			return false, nil
		case err != nil:
			return false, err
		}
		return d.IsDir(), nil
	})
	return o.shownErr(err)
}

// tooDeep says the slash path name, relative to a walk's top, lies
// deeper than safetree.MaxDepth.
func tooDeep(name string) bool {
	return name != "." && strings.Count(name, "/")+1 > safetree.MaxDepth
}
