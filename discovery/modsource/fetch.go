package modsource

import (
	"archive/tar"
	"archive/zip"
	"compress/bzip2"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tfmirror/tfmirror/internal/scratch"
	"github.com/tfmirror/tfmirror/internal/zipdir"
)

// Limits bound what one package may cost. A package over a limit is
// refused with a *LimitError.
type Limits struct {
	// MaxDownloadBytes bounds the bytes received for one package: every
	// response body of its fetch (an archive; a Git repository's ref
	// advertisement, negotiation lines and pack; error pages and
	// redirects; the same for each submodule). See MemoryOverhead for
	// what a fetch holds in memory.
	MaxDownloadBytes int64
	// MaxTreeBytes bounds the total size of the package's files.
	MaxTreeBytes int64
	// MaxEntries bounds the number of files, directories and links.
	MaxEntries int
	// MaxSubmoduleDepth bounds nested Git submodules.
	MaxSubmoduleDepth int
}

// MemoryOverhead is what one fetch may hold in memory besides what the
// limits allow for: 16 MiB. A fetch reads one response at a time, and
// holds of it at most its headers (1 MiB, the source HTTP client's
// limit: discovery.Client), what HTTP/2 receives ahead of the reader
// (4 MiB, Go's default window), a decompressor's state (bzip2's, the
// largest, is under 4 MiB), a tar entry's extended header (1 MiB, Go's
// limit) and read buffers of 64 KiB or so.
//
// Of what it receives, a fetch keeps in memory less than
// Limits.MaxDownloadBytes: archives and Git packs are written to disk as
// they arrive; of a Git ref advertisement only the refs the fetch may use
// are passed to go-git (which keeps what it is passed); an error page is
// read no further than its first KiB; go-git keeps upload-pack's shallow
// and ACK lines, 20 bytes for each line of 49 or more. Besides, a zip's
// directory and the package's listing take up to about 2 KiB per entry
// allowed (Limits.MaxEntries), and indexing a Git pack holds its objects,
// which the pack's headers must declare within Limits.MaxTreeBytes plus
// 1 KiB per entry allowed plus 1 MiB. The garbage collector lets the heap
// grow past what is held (GOGC).
const MemoryOverhead = 16 << 20

// LimitError is a package refused for going over a limit.
type LimitError struct{ Detail string }

func (e *LimitError) Error() string { return "module package refused: " + e.Detail }

// ErrSource matches a package its source host refused: a Git repository
// that is not found, or that needs credentials this fetch may not use.
var ErrSource = errors.New("module source host refused the package")

// Fetcher fetches packages.
type Fetcher struct {
	// HTTP is the client for Git's smart HTTP protocol.
	HTTP *http.Client
	// Open opens an archive URL for reading (its size, -1 when unknown).
	Open func(ctx context.Context, rawURL string) (io.ReadCloser, int64, error)
	// Limits bound each package.
	Limits Limits
	// TempDir is where packages are unpacked while they are fetched.
	// Default: os.TempDir().
	TempDir string
	// Credentials, when not nil, returns the context for the requests
	// for the repository or archive at rawURL (submodules each asked
	// for): one carrying the credential for its host when this fetch may
	// use one (discovery.WithSourceCredential), ctx otherwise. Default:
	// every request is anonymous.
	Credentials func(ctx context.Context, rawURL string) context.Context
}

// credentials returns the context for requests for rawURL.
func (f *Fetcher) credentials(ctx context.Context, rawURL string) context.Context {
	if f.Credentials == nil {
		return ctx
	}
	return f.Credentials(ctx, rawURL)
}

// Result describes a fetched package.
type Result struct {
	// Commit is the resolved Git commit id, "" for archives.
	Commit string
	// Files is the number of files written.
	Files int
}

// Fetch fetches the package of a (the whole repository or archive, not
// only a.Subdir) and writes it to dst as a deterministic tar.gz: entries
// in byte order of their paths, directories included, modes 0755 or
// 0644, fixed times and owners. Files that Git does not track (.git) are
// not in it. A Subdir that is not a glob must be a directory of the
// package.
func (f *Fetcher) Fetch(ctx context.Context, a Address, dst io.Writer) (Result, error) {
	tmp, err := os.MkdirTemp(f.TempDir, scratch.Pattern(scratch.Module, "", ""))
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(tmp)
	root := filepath.Join(tmp, "tree")
	if err := os.Mkdir(root, 0o755); err != nil {
		return Result{}, err
	}
	b := &budget{limits: f.Limits}
	// Every byte from the source hosts comes through m: what it lets
	// through is all that go-git and the archive readers see. Requests
	// still open when the fetch ends (go-git leaves a response it could
	// not decode open) end with it.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := &meter{max: f.Limits.MaxDownloadBytes}
	mf := m.fetcher(f)
	var res Result
	switch a.Kind {
	case KindGit:
		res.Commit, err = mf.fetchGit(ctx, a.URL, a.Ref, root, tmp, b, 0)
	case KindArchive:
		err = mf.fetchArchive(ctx, a, root, tmp, b)
	default:
		err = &UnsupportedError{Detail: fmt.Sprintf("kind %q", a.Kind)}
	}
	if merr := m.err(); merr != nil {
		// go-git keeps only the text of some errors: the limit is the
		// cause whatever the error says.
		return Result{}, merr
	}
	if err != nil {
		return Result{}, err
	}
	if a.Subdir != "" && !strings.ContainsAny(a.Subdir, "*?[") {
		if st, err := os.Stat(filepath.Join(root, filepath.FromSlash(a.Subdir))); err != nil || !st.IsDir() {
			return Result{}, fmt.Errorf("the package has no directory %q (the location's //SUBDIR)", a.Subdir)
		}
	}
	res.Files, err = writeTarGz(root, dst)
	return res, err
}

// budget counts what a package has cost so far.
type budget struct {
	limits  Limits
	tree    int64
	entries int
}

func (b *budget) entry() error {
	b.entries++
	if b.limits.MaxEntries > 0 && b.entries > b.limits.MaxEntries {
		return &LimitError{Detail: fmt.Sprintf("more than %d files and directories", b.limits.MaxEntries)}
	}
	return nil
}

func (b *budget) file(n int64) error {
	b.tree += n
	if b.limits.MaxTreeBytes > 0 && b.tree > b.limits.MaxTreeBytes {
		return &LimitError{Detail: fmt.Sprintf("its files are larger than %d bytes in all", b.limits.MaxTreeBytes)}
	}
	return nil
}

// inflateOverheadPerEntry is what a tar stream may hold per entry besides
// the file's bytes: its header, a long name's extended header, padding.
const inflateOverheadPerEntry = 3 << 10

// inflateReader counts the bytes a compressed archive inflates to, all of
// them, not only the files kept: entries that are skipped (.git, the
// root) or that are not files still cost their inflation. It stops once
// they pass the files' limit plus what the entries' headers may take, or
// when ctx ends.
type inflateReader struct {
	ctx      context.Context
	r        io.Reader
	b        *budget
	inflated int64
}

func (l *inflateReader) Read(p []byte) (int, error) {
	if err := l.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := l.r.Read(p)
	l.inflated += int64(n)
	lim := l.b.limits
	if lim.MaxTreeBytes > 0 {
		limit := lim.MaxTreeBytes + int64(max(lim.MaxEntries, 0))*inflateOverheadPerEntry + 1<<20
		if l.inflated > limit {
			return n, &LimitError{Detail: fmt.Sprintf("the archive unpacks to more than %d bytes", limit)}
		}
	}
	return n, err
}

// treeWriter writes files under root, within the budget.
type treeWriter struct {
	root string
	b    *budget
}

// target returns the path of name (slash-separated, relative) under root,
// refusing names that escape it.
func (t *treeWriter) target(name string) (string, error) {
	clean := path.Clean("/" + strings.ReplaceAll(name, "\\", "/"))
	if clean == "/" {
		return "", nil
	}
	for _, part := range strings.Split(clean[1:], "/") {
		if part == ".git" {
			return "", nil // never part of a package
		}
	}
	return filepath.Join(t.root, filepath.FromSlash(clean[1:])), nil
}

func (t *treeWriter) dir(name string) error {
	p, err := t.target(name)
	if err != nil || p == "" {
		return err
	}
	if err := t.b.entry(); err != nil {
		return err
	}
	return os.MkdirAll(p, 0o755)
}

// file writes a file of size bytes read from r (which must give that
// many: fewer fail, more are not read).
func (t *treeWriter) file(name string, exec bool, size int64, r io.Reader) error {
	p, err := t.target(name)
	if err != nil || p == "" {
		return err
	}
	if err := t.b.entry(); err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("the package's entry %q has a negative size", name)
	}
	if err := t.b.file(size); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if exec {
		mode = 0o755
	}
	os.Remove(p) // a later entry of the same name wins
	out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, io.LimitReader(r, size))
	if err == nil && n < size {
		err = fmt.Errorf("the package's entry %q ends after %d of its %d bytes", name, n, size)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

func (t *treeWriter) symlink(name, target string) error {
	p, err := t.target(name)
	if err != nil || p == "" {
		return err
	}
	if err := t.b.entry(); err != nil {
		return err
	}
	// Only links that stay inside the package.
	// (Resolved relative to the package's top: a rooted path would
	// swallow the ".." that climb out of it.)
	rel := path.Join(path.Dir(strings.TrimPrefix(path.Clean("/"+name), "/")), target)
	if path.IsAbs(target) || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("the package's link %q points outside it (%q)", name, target)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	os.Remove(p)
	return os.Symlink(target, p)
}

// fetchArchive downloads and unpacks an archive into root.
func (f *Fetcher) fetchArchive(ctx context.Context, a Address, root, tmp string, b *budget) error {
	body, size, err := f.Open(f.credentials(ctx, a.URL), a.URL)
	if err != nil {
		return err
	}
	defer body.Close()
	if max := f.Limits.MaxDownloadBytes; max > 0 && size > max {
		return &LimitError{Detail: fmt.Sprintf("the archive is %d bytes, more than the %d allowed", size, max)}
	}
	r := io.Reader(body) // counted by the fetch's meter
	tw := &treeWriter{root: root, b: b}
	switch a.Format {
	case "zip":
		// zip needs random access: spool it first.
		spool, err := os.CreateTemp(tmp, "archive-*.zip")
		if err != nil {
			return err
		}
		defer spool.Close()
		n, err := io.Copy(spool, r)
		if err != nil {
			return err
		}
		// The entries its end record declares are counted before the
		// zip package makes room for each of them.
		zr, err := zipdir.NewReader(spool, n, f.Limits.MaxEntries)
		var many *zipdir.TooManyEntriesError
		switch {
		case errors.As(err, &many):
			return &LimitError{Detail: fmt.Sprintf("the zip has %d entries, more than the %d files and directories allowed", many.Entries, many.Max)}
		case errors.Is(err, zipdir.ErrDirectoryTooLarge):
			return &LimitError{Detail: fmt.Sprintf("the zip's directory is larger than %d entries need", f.Limits.MaxEntries)}
		case err != nil:
			return fmt.Errorf("the package is not a zip archive: %w", err)
		}
		return unzip(zr, tw)
	case "tar.bz2", "tbz2":
		return untar(ctx, &inflateReader{ctx: ctx, r: bzip2.NewReader(r), b: b}, tw)
	default:
		gz, err := gzip.NewReader(r)
		if err != nil {
			return fmt.Errorf("the package is not a gzip archive: %w", err)
		}
		defer gz.Close()
		return untar(ctx, &inflateReader{ctx: ctx, r: gz, b: b}, tw)
	}
}

func untar(ctx context.Context, r io.Reader, tw *treeWriter) error {
	tr := tar.NewReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			var le *LimitError
			if errors.As(err, &le) {
				return err
			}
			return fmt.Errorf("reading the package's tar archive: %w", err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = tw.dir(h.Name)
		case tar.TypeReg, tar.TypeRegA:
			err = tw.file(h.Name, h.Mode&0o111 != 0, h.Size, tr)
		case tar.TypeSymlink:
			err = tw.symlink(h.Name, h.Linkname)
		case tar.TypeXGlobalHeader, tar.TypeXHeader:
		default:
			err = fmt.Errorf("the package's entry %q is of a type modules cannot have (%c)", h.Name, h.Typeflag)
		}
		if err != nil {
			return err
		}
	}
}

// unzip writes the entries of zr (opened by zipdir.NewReader, within
// the entries allowed) through tw.
func unzip(zr *zip.Reader, tw *treeWriter) error {
	for _, zf := range zr.File {
		if strings.HasSuffix(zf.Name, "/") {
			if err := tw.dir(zf.Name); err != nil {
				return err
			}
			continue
		}
		if zf.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("the package's zip entry %q is a link, which zip packages cannot carry here", zf.Name)
		}
		if !zf.Mode().IsRegular() {
			return fmt.Errorf("the package's zip entry %q is not a file", zf.Name)
		}
		// The declared size counts against the limits before anything
		// is inflated, and the bytes inflated are held to it.
		if zf.UncompressedSize64 > 1<<62 {
			return &LimitError{Detail: fmt.Sprintf("zip entry %q declares %d bytes", zf.Name, zf.UncompressedSize64)}
		}
		rc, err := zf.Open()
		if err != nil {
			return fmt.Errorf("reading the package's zip entry %q: %w", zf.Name, err)
		}
		err = tw.file(zf.Name, zf.Mode()&0o111 != 0, int64(zf.UncompressedSize64), rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// fixedTime is the time of every entry of a normalized archive.
var fixedTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// writeTarGz writes the tree under root to w as a deterministic tar.gz
// and returns how many files it holds.
func writeTarGz(root string, w io.Writer) (int, error) {
	type entry struct {
		rel string
		fi  fs.FileInfo
	}
	var entries []entry
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		entries = append(entries, entry{filepath.ToSlash(rel), fi})
		return nil
	})
	if err != nil {
		return 0, err
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.rel, b.rel) })
	gz, _ := gzip.NewWriterLevel(w, gzip.BestCompression)
	tw := tar.NewWriter(gz)
	files := 0
	for _, e := range entries {
		h := &tar.Header{Name: e.rel, ModTime: fixedTime}
		switch {
		case e.fi.IsDir():
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, e.rel+"/", 0o755
		case e.fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(filepath.Join(root, filepath.FromSlash(e.rel)))
			if err != nil {
				return 0, err
			}
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, target, 0o777
		default:
			h.Typeflag, h.Size, h.Mode = tar.TypeReg, e.fi.Size(), 0o644
			if e.fi.Mode()&0o111 != 0 {
				h.Mode = 0o755
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return 0, err
		}
		if h.Typeflag == tar.TypeReg {
			f, err := os.Open(filepath.Join(root, filepath.FromSlash(e.rel)))
			if err != nil {
				return 0, err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			if err != nil {
				return 0, err
			}
			files++
		}
	}
	if err := tw.Close(); err != nil {
		return 0, err
	}
	return files, gz.Close()
}

// Unpack writes the files of a package as Fetch wrote it (a tar.gz) under
// dir, within limits: for callers that read a package's configuration.
func Unpack(ctx context.Context, r io.Reader, dir string, limits Limits) error {
	b := &budget{limits: limits}
	gz, err := gzip.NewReader(&meteredReader{r: r, m: &meter{max: limits.MaxDownloadBytes}})
	if err != nil {
		return fmt.Errorf("the package is not a gzip archive: %w", err)
	}
	defer gz.Close()
	return untar(ctx, &inflateReader{ctx: ctx, r: gz, b: b}, &treeWriter{root: dir, b: b})
}
