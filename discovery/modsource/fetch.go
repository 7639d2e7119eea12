package modsource

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"context"
	"crypto/sha256"
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

	"github.com/tfmirror/tfmirror/v2/internal/logbound"
	"github.com/tfmirror/tfmirror/v2/internal/redact"
	"github.com/tfmirror/tfmirror/v2/internal/safetree"
	"github.com/tfmirror/tfmirror/v2/internal/scratch"
	"github.com/tfmirror/tfmirror/v2/internal/zipdir"
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
// limit) and read buffers of 64 KiB or so; go-git keeps 1 MiB of the
// objects it reads (objectCacheBytes).
//
// Of what it receives, a fetch keeps in memory less than
// Limits.MaxDownloadBytes: archives and Git packs are written to disk as
// they arrive; of a Git ref advertisement only the refs the fetch may use
// are passed to go-git (which keeps what it is passed: for an abbreviated
// commit id, up to 10,000 branches and tags, whose history of 20,000
// commits at most is indexed as a pack is below); an error page is
// read no further than its first KiB; go-git keeps upload-pack's shallow
// and ACK lines, 20 bytes for each line of 49 or more. Besides, a zip's
// directory and the package's listing take up to about 2 KiB per entry
// allowed (Limits.MaxEntries), and indexing a Git pack holds its objects
// whole, a few at once (indexPack: a delta's base while the deltas made
// from it are made; for a pack of offset deltas, as Git sends, some
// log2 of its objects at most), which the pack's headers must declare
// within Limits.MaxTreeBytes plus 1 KiB per entry allowed plus 1 MiB in
// all, and each within what its type needs (packBounds: a tree 1 KiB per
// entry allowed, a commit 1 MiB), and some 440 bytes for each of them,
// which may be no more than the entries allowed plus 64 (packObjects).
// No cache of go-git's holds more: its own indexing kept up to 96 MiB of
// delta bases, and its reading as much of the objects read, whatever the
// limits. The garbage collector lets the heap grow past what is held
// (GOGC).
const MemoryOverhead = 16 << 20

// MaxPackageBytes is the most bytes a package as Fetch writes it (a
// normalized tar.gz) may take within limits, 0 for no bound: about its
// files' bytes, which may be more than the bytes its source sent (a Git
// pack holds the bytes of many identical files once, gzip finds nothing to
// share between files far apart), plus the download's. Whatever reads a
// package back (Unpack, CheckPackageLinks, WriteZip, an import, the
// shared store) takes one of this size.
func MaxPackageBytes(limits Limits) int64 {
	if limits.MaxDownloadBytes <= 0 || limits.MaxTreeBytes <= 0 {
		return 0
	}
	return limits.MaxDownloadBytes + limits.MaxTreeBytes
}

// The settings that set Limits, as a *LimitError names them: the
// operator who reads one, in the log or in a client's answer, learns what
// to raise (docs/modules.md).
const (
	settingMaxBytes     = "--module-max-bytes"      // Limits.MaxDownloadBytes
	settingMaxTreeBytes = "--module-max-tree-bytes" // Limits.MaxTreeBytes
	settingMaxFiles     = "--module-max-files"      // Limits.MaxEntries
	// settingMaxPackage sets MaxPackageBytes.
	settingMaxPackage = settingMaxBytes + " plus " + settingMaxTreeBytes
)

// LimitError is a package refused for going over a limit.
type LimitError struct {
	Detail string
	// Setting is what sets the limit, as the operator sets it (the
	// flag, "--module-max-files"); "" for a fixed bound, which no setting
	// raises (Limits.MaxSubmoduleDepth is one too: no flag sets it).
	Setting string
}

// PackageLimitError is the *LimitError of a package as Fetch wrote it,
// read back from elsewhere (an import), that is larger than
// MaxPackageBytes allows: detail says how large.
func PackageLimitError(detail string) *LimitError {
	return &LimitError{Detail: detail, Setting: settingMaxPackage}
}

func (e *LimitError) Error() string {
	if e.Setting == "" {
		return "module package refused: " + e.Detail + " (a fixed bound: no setting raises it)"
	}
	return "module package refused: " + e.Detail + " (" + e.Setting + ")"
}

// ErrSource matches a package its source host refused: a Git repository
// that is not found, or that needs credentials this fetch may not use.
var ErrSource = errors.New("module source host refused the package")

// ErrBadPackage matches a fetch that failed on what its source host sent:
// an archive that is not one or is cut short, an entry of a type modules
// cannot have, a Git repository without the ref asked for, a tree or
// .gitmodules Git refuses, a package without the location's //SUBDIR.
// Fetch marks so every error it fails with but those of the system it
// runs on (the disk's: *fs.PathError, *os.LinkError, *os.SyscallError),
// of its context, and those it says more of (*LimitError, ErrSource,
// ErrUnsupported, safetree.ErrUnsafe). An error that holds a failure of
// the network that brought the bytes may be marked too: that failure, as
// the client that reached the source host reports it, is to be read
// first. The error's message is the one it marks.
var ErrBadPackage = errors.New("module source host sent no package the mirror can read")

// badPackageError marks Err as the package's (ErrBadPackage).
type badPackageError struct{ Err error }

func (e *badPackageError) Error() string   { return e.Err.Error() }
func (e *badPackageError) Unwrap() []error { return []error{ErrBadPackage, e.Err} }

// sourceFailure returns err, failed with by a fetch whose context is ctx,
// marked ErrBadPackage unless it is the system's, ctx's, one that says
// more of itself, or marked already (see ErrBadPackage).
func sourceFailure(ctx context.Context, err error) error {
	var (
		limit *LimitError
		path  *fs.PathError
		link  *os.LinkError
		sys   *os.SyscallError
	)
	switch {
	case err == nil, ctx.Err() != nil,
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &limit), errors.Is(err, ErrSource), errors.Is(err, ErrUnsupported),
		errors.Is(err, safetree.ErrUnsafe), errors.Is(err, ErrBadPackage),
		errors.As(err, &path), errors.As(err, &link), errors.As(err, &sys):
		return err
	}
	return &badPackageError{Err: err}
}

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
	// Tree is the package's PackageTree.
	Tree string
}

// Fetch fetches the package of a (the whole repository or archive, not
// only a.Subdir) and writes it to dst as a deterministic tar.gz: entries
// in byte order of their paths, directories included, modes 0755 or
// 0644, fixed times and owners. Files that Git does not track (.git) are
// not in it. A Subdir that is not a glob must be a directory of the
// package.
//
// Its error holds no credential its requests sent (as its Credentials
// context's client records them: redact.Sent): what a source host
// answers (an error page, a Git ERR line or sideband message, an
// archive entry's name) may echo one, and any error here may quote that;
// each such credential is replaced by "REDACTED". Its text is then cut
// to logbound.MaxErrorText bytes: a Git server's ERR line or sideband
// message may be 64 KiB, as may an error page.
func (f *Fetcher) Fetch(ctx context.Context, a Address, dst io.Writer) (Result, error) {
	ctx = redact.Sending(ctx)
	res, err := f.fetch(ctx, a, dst)
	if err = redact.SentError(ctx, err); err != nil {
		err = logbound.CutError(err, logbound.MaxErrorText)
	}
	return res, err
}

func (f *Fetcher) fetch(ctx context.Context, a Address, dst io.Writer) (Result, error) {
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
	open := openTree
	if a.Kind == KindGit {
		open = openGitTree
	}
	tw, err := open(root, b)
	if err != nil {
		return Result{}, err
	}
	defer tw.w.Close()
	// Every byte from the source hosts comes through m: what it lets
	// through is all that go-git and the archive readers see. Requests
	// still open when the fetch ends (go-git leaves a response it could
	// not decode open) end with it.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := &meter{max: f.Limits.MaxDownloadBytes, setting: settingMaxBytes}
	mf := m.fetcher(f)
	var res Result
	switch a.Kind {
	case KindGit:
		res.Commit, err = mf.fetchGit(ctx, a.URL, a.Ref, a.CloneBranch, tw, tmp, b, 0)
	case KindArchive:
		err = mf.fetchArchive(ctx, a, tw, tmp, b)
	default:
		err = &UnsupportedError{Detail: fmt.Sprintf("kind %q", a.Kind)}
	}
	if merr := m.err(); merr != nil {
		// go-git keeps only the text of some errors: the limit is the
		// cause whatever the error says.
		return Result{}, merr
	}
	if err == nil {
		err = tw.finish()
	}
	if err != nil {
		return Result{}, sourceFailure(ctx, err)
	}
	if a.Subdir != "" && !strings.ContainsAny(a.Subdir, "*?[") {
		if st, err := os.Stat(filepath.Join(root, filepath.FromSlash(a.Subdir))); err != nil || !st.IsDir() {
			return Result{}, &badPackageError{Err: fmt.Errorf("the package has no directory %q (the location's //SUBDIR)", a.Subdir)}
		}
	}
	res.Files, res.Tree, err = writeTarGz(root, tw.isExec, dst)
	return res, err
}

// budget counts what a package has cost so far.
type budget struct {
	limits     Limits
	tree       int64
	entries    int
	submodules int // Git submodules named so far (maxSubmodules)
}

func (b *budget) entry() error {
	b.entries++
	if b.limits.MaxEntries > 0 && b.entries > b.limits.MaxEntries {
		return &LimitError{Detail: fmt.Sprintf("more than %d files and directories", b.limits.MaxEntries), Setting: settingMaxFiles}
	}
	return nil
}

func (b *budget) file(n int64) error {
	b.tree += n
	if b.limits.MaxTreeBytes > 0 && b.tree > b.limits.MaxTreeBytes {
		return &LimitError{Detail: fmt.Sprintf("its files are larger than %d bytes in all", b.limits.MaxTreeBytes), Setting: settingMaxTreeBytes}
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
			return n, &LimitError{Detail: fmt.Sprintf("the archive unpacks to more than %d bytes", limit), Setting: settingMaxTreeBytes}
		}
	}
	return n, err
}

// treeWriter writes a package's entries through one safetree.Writer (for
// a Git repository's submodules too, under prefix), within the budget.
// Names are cleaned as modules have always been: a backslash separates,
// and ".." that would climb out of the package stops at its top; .git is
// left out wherever it is, in every spelling of it (isDotGit).
type treeWriter struct {
	w      *safetree.Writer
	b      *budget
	prefix string // "" or a submodule's directory, ending in "/"
	// exec are the files written executable, by name (shared with the
	// submodules' writers): what the source said, which the disk may not
	// keep (a file system that keeps no modes, a umask).
	exec map[string]bool
	// whole says the tree is a package as Fetch wrote it, which holds
	// nothing that is left out: an entry under .git is refused, not
	// skipped (it would be served unchecked with the package).
	whole bool
}

// openTree opens the writer of the tree under dir.
func openTree(dir string, b *budget) (*treeWriter, error) {
	return openTreeWith(dir, b, safetree.Options{})
}

// openGitTree opens the writer of a Git tree (its submodules' with it)
// under dir. Git writes each entry of a tree under a name of its own
// (the tree is refused where it names one twice, treeOrder): an entry
// the package would hold under a name written already (one with a
// backslash, which the package takes for a separator, beside the one
// with a slash; names that differ only in case, on a disk that compares
// names without it) is refused, not written over the other.
func openGitTree(dir string, b *budget) (*treeWriter, error) {
	return openTreeWith(dir, b, safetree.Options{NoReplace: true})
}

func openTreeWith(dir string, b *budget, opts safetree.Options) (*treeWriter, error) {
	// A directory an entry implies, which no entry names, is an entry.
	opts.ImpliedDir = func(string) error { return b.entry() }
	w, err := safetree.Open(dir, opts)
	if err != nil {
		return nil, err
	}
	return &treeWriter{w: w, b: b, exec: map[string]bool{}}, nil
}

// isExec reports whether the file name (as the tree names it) was written
// executable.
func (t *treeWriter) isExec(name string) bool { return t.exec[name] }

// sub is the writer of the submodule at dir (a name of t's).
func (t *treeWriter) sub(dir string) (*treeWriter, bool) {
	n, _ := t.target(dir)
	return &treeWriter{w: t.w, b: t.b, prefix: n + "/", exec: t.exec}, n != ""
}

// target returns the name of name in the tree, "" for the package's top
// and for what is left out (leftOut: under .git).
func (t *treeWriter) target(name string) (n string, leftOut bool) {
	clean := path.Clean("/" + strings.ReplaceAll(name, "\\", "/"))
	if clean == "/" {
		return "", false
	}
	for _, part := range strings.Split(clean[1:], "/") {
		if isDotGit(part) {
			return "", true // never part of a package
		}
	}
	return t.prefix + clean[1:], false
}

// isDotGit reports whether a client's file system may take the name part
// (one component of a path) for .git, as Git's own checks of tree paths
// do (core.protectHFS and core.protectNTFS): in any case (macOS and
// Windows compare names without it), with the code points HFS+ ignores
// anywhere in it (safetree.WithoutIgnoredByHFS), with the dots and spaces Windows drops from a name's end or
// an NTFS stream after a colon, or as NTFS's short name git~1. A package
// holds no such name: a .GIT/config unpacked on macOS is a Git
// configuration that every git command run inside the module obeys (its
// core.fsmonitor is a command).
func isDotGit(part string) bool {
	return namedAs(part, ".git", "git~1")
}

// isDotGitmodules reports whether a client's file system, or Git, may
// take the name part for .gitmodules, as isDotGit does for .git (NTFS's
// short name gitmod~1 included): Git refuses a tree where such a name
// is a symbolic link.
func isDotGitmodules(part string) bool {
	return namedAs(part, ".gitmodules", "gitmod~1")
}

// namedAs reports whether a client's file system may take the name part
// for name, or for its NTFS short name short: without case, the code
// points HFS+ ignores, an NTFS stream after a colon, and the dots and
// spaces Windows drops from a name's end.
func namedAs(part, name, short string) bool {
	s := safetree.WithoutIgnoredByHFS(part)
	if i := strings.IndexByte(s, ':'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimRight(s, ". ")
	return strings.EqualFold(s, name) || strings.EqualFold(s, short)
}

// name returns the name of the entry in the tree, "" for the package's
// top and for what is left out; in a whole package, an entry left out
// is refused.
func (t *treeWriter) name(entry string) (string, error) {
	n, leftOut := t.target(entry)
	if leftOut && t.whole {
		return "", fmt.Errorf("module package refused: %w: the entry %q is under .git, which no package holds", safetree.ErrUnsafe, entry)
	}
	return n, nil
}

func (t *treeWriter) dir(name string) error {
	n, err := t.name(name)
	if n == "" || err != nil {
		return err
	}
	if err := t.b.entry(); err != nil {
		return err
	}
	return t.refused(t.w.Dir(n))
}

// file writes a file of size bytes read from r (which must give that
// many: fewer fail, more are not read).
func (t *treeWriter) file(name string, exec bool, size int64, r io.Reader) error {
	n, err := t.name(name)
	if n == "" || err != nil {
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
	perm := fs.FileMode(0o644)
	if exec {
		perm = 0o755
	}
	delete(t.exec, n) // the later entry wins
	if err := t.refused(t.w.File(n, perm, size, r)); err != nil {
		return twice(name, n, err)
	}
	if exec {
		t.exec[n] = true
	}
	return nil
}

// symlink records a link; links are made by finish, once every one of
// them is known to stay inside the package.
func (t *treeWriter) symlink(name, target string) error {
	n, err := t.name(name)
	if n == "" || err != nil {
		return err
	}
	if err := t.b.entry(); err != nil {
		return err
	}
	delete(t.exec, n) // the later entry wins
	return twice(name, n, t.refused(t.w.Symlink(n, target)))
}

// twice says what err is when it is a Git tree's writer's refusal of a
// second file or link of one name (openGitTree): which entry, and what
// name of the package it would have been written over.
func twice(name, n string, err error) error {
	var pe *fs.PathError
	if !errors.Is(err, fs.ErrExist) || errors.As(err, &pe) {
		return err
	}
	return fmt.Errorf("the entry %q would be the package's %q, written already from another entry (the package takes a backslash for a slash, and the mirror's disk may not tell names apart by case): %w", name, n, fs.ErrExist)
}

// finish makes the package's links, all inside it, and closes the tree.
func (t *treeWriter) finish() error {
	err := t.refused(t.w.Finish())
	if cerr := t.w.Close(); err == nil {
		err = cerr
	}
	return err
}

// refused says err (safetree's) is the package's.
func (t *treeWriter) refused(err error) error {
	if errors.Is(err, safetree.ErrUnsafe) {
		return fmt.Errorf("module package refused: %w", err)
	}
	return err
}

// fetchArchive downloads and unpacks an archive into tw.
func (f *Fetcher) fetchArchive(ctx context.Context, a Address, tw *treeWriter, tmp string, b *budget) error {
	body, size, err := f.Open(f.credentials(ctx, a.URL), a.URL)
	if err != nil {
		return err
	}
	defer body.Close()
	if max := f.Limits.MaxDownloadBytes; max > 0 && size > max {
		return &LimitError{Detail: fmt.Sprintf("the archive is %d bytes, more than the %d allowed", size, max), Setting: settingMaxBytes}
	}
	r := io.Reader(body) // counted by the fetch's meter
	format := a.Format
	if format == "" {
		// A package URL (ParseDirect): the bytes say what it is.
		if r, format, err = sniffArchive(r); err != nil {
			return err
		}
	}
	switch format {
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
			return &LimitError{Detail: fmt.Sprintf("the zip has %d entries, more than the %d files and directories allowed", many.Entries, many.Max), Setting: settingMaxFiles}
		case errors.Is(err, zipdir.ErrDirectoryTooLarge):
			return &LimitError{Detail: fmt.Sprintf("the zip's directory is larger than %d entries need", f.Limits.MaxEntries), Setting: settingMaxFiles}
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

// sniffArchive tells the format of an archive whose URL does not (a
// package URL, ParseDirect) from its first bytes, as OpenTofu does for
// such a package: a zip, or a tar compressed by gzip or bzip2. It
// returns a reader of the whole archive.
func sniffArchive(r io.Reader) (io.Reader, string, error) {
	br := bufio.NewReader(r)
	head, err := br.Peek(6)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, "", err
	}
	switch {
	case bytes.HasPrefix(head, []byte("PK\x03\x04")), bytes.HasPrefix(head, []byte("PK\x05\x06")):
		return br, "zip", nil
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		return br, "tar.gz", nil
	case bytes.HasPrefix(head, []byte("BZh")):
		return br, "tar.bz2", nil
	case bytes.HasPrefix(head, []byte("\xfd7zXZ\x00")):
		return nil, "", &UnsupportedError{Detail: "the package is a tar archive compressed by xz, which this mirror does not unpack (zip, tar.gz and tar.bz2 it does)"}
	}
	return nil, "", errors.New("the package is neither a zip archive nor a tar archive compressed by gzip or bzip2")
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
		case tar.TypeReg: // tar.Reader gives an old archive's TypeRegA as TypeReg, or TypeDir
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
// and returns how many files it holds, each 0755 when exec says so (by
// its name in the tree), else 0644: not as the disk kept it. A tree with
// a link that resolves outside it is refused.
func writeTarGz(root string, exec func(string) bool, w io.Writer) (int, string, error) {
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
		return 0, "", err
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.rel, b.rel) })
	// No link out of the package, however the tree came to hold it.
	links := map[string]string{}
	for _, e := range entries {
		if e.fi.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(filepath.Join(root, filepath.FromSlash(e.rel)))
			if err != nil {
				return 0, "", err
			}
			links[e.rel] = target
		}
	}
	if err := safetree.CheckLinks(links); err != nil {
		return 0, "", fmt.Errorf("module package refused: %w", err)
	}
	gz, _ := gzip.NewWriterLevel(w, gzip.BestCompression)
	tw := tar.NewWriter(gz)
	tree, content := newTreeDigest(), sha256.New()
	files := 0
	for _, e := range entries {
		h := &tar.Header{Name: e.rel, ModTime: fixedTime}
		switch {
		case e.fi.IsDir():
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, e.rel+"/", 0o755
		case e.fi.Mode()&fs.ModeSymlink != 0:
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, links[e.rel], 0o777
		default:
			h.Typeflag, h.Size, h.Mode = tar.TypeReg, e.fi.Size(), 0o644
			if exec(e.rel) {
				h.Mode = 0o755
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return 0, "", err
		}
		content.Reset()
		if h.Typeflag == tar.TypeReg {
			f, err := os.Open(filepath.Join(root, filepath.FromSlash(e.rel)))
			if err != nil {
				return 0, "", err
			}
			_, err = io.Copy(io.MultiWriter(tw, content), f)
			f.Close()
			if err != nil {
				return 0, "", err
			}
			files++
		}
		tree.add(h, content)
	}
	if err := tw.Close(); err != nil {
		return 0, "", err
	}
	return files, tree.sum(), gz.Close()
}

// Unpack writes the files of a package as Fetch wrote it (a tar.gz) under
// dir, within limits, through one safetree.Writer: for callers that read
// a package's configuration, and to check a package from elsewhere (an
// import) before it is kept. A package with a link that resolves outside
// it, or an entry under a link, is refused, and no link of it is made; so
// is one with an entry under .git, which Fetch leaves out of every package
// (skipped, it would be served unchecked with the package).
func Unpack(ctx context.Context, r io.Reader, dir string, limits Limits) error {
	_, err := unpack(ctx, r, dir, limits)
	return err
}

// unpack is Unpack, and returns the files the package says are
// executable (by name), whatever the disk kept of their modes.
func unpack(ctx context.Context, r io.Reader, dir string, limits Limits) (map[string]bool, error) {
	b := &budget{limits: limits}
	gz, err := gzip.NewReader(&meteredReader{r: r, m: &meter{max: MaxPackageBytes(limits), what: "the package", setting: settingMaxPackage}})
	if err != nil {
		return nil, fmt.Errorf("the package is not a gzip archive: %w", err)
	}
	defer gz.Close()
	tw, err := openTree(dir, b)
	if err != nil {
		return nil, err
	}
	defer tw.w.Close()
	tw.whole = true
	if err := untar(ctx, &inflateReader{ctx: ctx, r: gz, b: b}, tw); err != nil {
		return nil, err
	}
	return tw.exec, tw.finish()
}

// eachEntry reads a package as Fetch wrote it (a tar.gz) within limits
// (its bytes, entries and unpacked bytes) and calls fn with each entry, in
// the archive's order, and a reader of its bytes, until fn fails.
func eachEntry(ctx context.Context, r io.Reader, limits Limits, fn func(h *tar.Header, body io.Reader) error) error {
	b := &budget{limits: limits}
	gz, err := gzip.NewReader(&meteredReader{r: r, m: &meter{max: MaxPackageBytes(limits), what: "the package", setting: settingMaxPackage}})
	if err != nil {
		return fmt.Errorf("the package is not a gzip archive: %w", err)
	}
	defer gz.Close()
	tr := tar.NewReader(&inflateReader{ctx: ctx, r: gz, b: b})
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			var le *LimitError
			if errors.As(err, &le) || ctx.Err() != nil {
				return err
			}
			return fmt.Errorf("reading the package's tar archive: %w", err)
		}
		if err := b.entry(); err != nil {
			return err
		}
		if err := fn(h, tr); err != nil {
			return err
		}
	}
}

// CheckPackageLinks reads a package as Fetch wrote it (a tar.gz), within
// limits, and refuses it when one of its links resolves outside it: from
// where the link really is, through a chain of the package's links
// included, or when a name is one Unpack refuses (under .git in any
// spelling, holding a control character). Names are read as Unpack reads them. For packages kept before
// every package was checked so (a cache check), which Unpack refuses.
func CheckPackageLinks(ctx context.Context, r io.Reader, limits Limits) error {
	names := &treeWriter{whole: true}
	links := map[string]string{}
	err := eachEntry(ctx, r, limits, func(h *tar.Header, _ io.Reader) error {
		n, err := names.name(h.Name)
		if err != nil || n == "" {
			return err
		}
		// The writer's rules on a name (control characters, depth),
		// which a package kept before one of them was added may break.
		if _, err := safetree.CleanName(n); err != nil {
			return fmt.Errorf("module package refused: %w", err)
		}
		if h.Typeflag == tar.TypeSymlink {
			links[n] = h.Linkname
		} else {
			delete(links, n) // the later entry wins
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := safetree.CheckLinks(links); err != nil {
		return fmt.Errorf("module package refused: %w", err)
	}
	return nil
}
