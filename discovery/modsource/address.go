// Package modsource fetches registry module packages from the source
// hosts that module download locations name, and writes each as one
// normalized archive.
//
// It owns: parsing a download location (the subset of go-getter's syntax
// that the clients accept from registries and that the mirror can fetch:
// git::https with ?ref=, https archives, GitHub and Bitbucket shorthands,
// //SUBDIR), fetching a Git repository shallowly at one ref with go-git
// (submodules included) or an archive over HTTPS, and writing the tree as
// a deterministic tar.gz within limits of bytes and entries. Every byte a
// fetch receives passes one counter, below go-git and the archive
// readers, that holds it to Limits.MaxDownloadBytes; what a fetch holds
// in memory besides is MemoryOverhead. It does not
// choose which hosts may be contacted or how (the HTTP client and the
// archive opener it is given enforce the network policy: see
// discovery.Client.SourceHTTPClient and OpenSource), and caches nothing.
package modsource

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/tfmirror/tfmirror/v2/internal/redact"
)

// Kind is how a package is fetched.
type Kind string

// Kinds of source.
const (
	KindGit     Kind = "git"     // a Git repository over https
	KindArchive Kind = "archive" // an archive over https
)

// Address is a parsed download location.
type Address struct {
	Kind Kind
	// URL is the https URL of the repository or archive, without the
	// parameters that go-getter consumes (ref, archive, depth).
	URL string
	// Ref is the Git ref (tag, branch or commit id); "" is the remote's
	// default branch.
	Ref string
	// CloneBranch says the location gives a depth (?depth=N, N > 0), with
	// which go-getter clones Ref as `git clone --branch` takes it (a
	// branch before a tag so named) rather than checking it out (a tag,
	// the default branch, then a commit id before another branch). The
	// fetch is shallow either way.
	CloneBranch bool
	// Format is the archive's format: "tar.gz", "tgz", "tar.bz2",
	// "tbz2" or "zip"; "" for a package URL (ParseDirect), whose format
	// is what its bytes are.
	Format string
	// Subdir is the //SUBDIR part, "" for none. The whole package is
	// fetched; the clients use the subdirectory of it.
	Subdir string
}

// Package is the address of the package without Subdir, in the
// location syntax (git::URL?ref=REF, with &depth=1 when CloneBranch, or
// URL?archive=FORMAT).
func (a Address) Package() string {
	switch a.Kind {
	case KindGit:
		s := "git::" + a.URL
		if a.Ref != "" {
			s += sep(a.URL) + "ref=" + url.QueryEscape(a.Ref)
		}
		if a.CloneBranch {
			s += sep(s) + "depth=1"
		}
		return s
	default:
		if a.Format == "" {
			return a.URL // a package URL: as it is
		}
		return a.URL + sep(a.URL) + "archive=" + a.Format
	}
}

func sep(u string) string {
	if strings.Contains(u, "?") {
		return "&"
	}
	return "?"
}

// UnsupportedError is a location this mirror cannot fetch: its scheme or
// getter (s3, gcs, hg, ssh, ...) or its form.
type UnsupportedError struct {
	Scheme string // the getter or URL scheme, "" when the form is the problem
	Detail string
}

func (e *UnsupportedError) Error() string {
	if e.Scheme != "" {
		return fmt.Sprintf("module source scheme %q is not supported by this mirror (only git::https, https archives and GitHub/Bitbucket shorthands are): %s", e.Scheme, e.Detail)
	}
	return "module source not supported by this mirror: " + e.Detail
}

// ErrUnsupported is matched by every *UnsupportedError.
var ErrUnsupported = errors.New("module source not supported")

func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

var (
	forcedGetter = regexp.MustCompile(`^([A-Za-z0-9]+)::(.+)$`)
	scpLike      = regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:`)
	// archiveExts are the archive formats both the clients and this
	// mirror unpack (the clients also take .tar.xz and .txz).
	archiveExts = []string{"tar.gz", "tgz", "tar.bz2", "tbz2", "zip"}
)

// Parse parses a download location. Locations this mirror cannot fetch
// are *UnsupportedError.
func Parse(location string) (Address, error) {
	src := strings.TrimSpace(location)
	if src == "" {
		return Address{}, &UnsupportedError{Detail: "empty location"}
	}
	forced := ""
	if m := forcedGetter.FindStringSubmatch(src); m != nil {
		forced, src = strings.ToLower(m[1]), m[2]
	}
	src, subdir := splitSubdir(src)
	if climbsOut(subdir) {
		// As the clients refuse it: the package would not hold the module.
		return Address{}, &UnsupportedError{Detail: fmt.Sprintf("subdirectory path %q leads outside of the module package", subdir)}
	}
	subdir = cleanSubdir(subdir)
	if scpLike.MatchString(src) {
		return Address{}, &UnsupportedError{Scheme: "ssh", Detail: "Git over SSH needs keys the mirror does not hold for modules"}
	}
	switch forced {
	case "", "git", "http", "https":
	default:
		return Address{}, &UnsupportedError{Scheme: forced, Detail: redact.Location(location)}
	}
	if !strings.Contains(src, "://") {
		// Shorthands the clients accept.
		switch {
		case strings.HasPrefix(src, "github.com/"), strings.HasPrefix(src, "bitbucket.org/"):
			host, rest, _ := strings.Cut(src, "/")
			repo, query, _ := strings.Cut(rest, "?")
			if strings.Count(strings.TrimSuffix(repo, ".git"), "/") != 1 {
				return Address{}, &UnsupportedError{Detail: fmt.Sprintf("%s shorthand %q is not ORG/REPO", host, redact.Location(src))}
			}
			src = "https://" + host + "/" + strings.TrimSuffix(repo, ".git") + ".git"
			if query != "" {
				src += "?" + query
			}
			if forced == "" {
				forced = "git"
			}
		default:
			return Address{}, &UnsupportedError{Detail: fmt.Sprintf("%q is neither a URL nor a GitHub or Bitbucket shorthand", redact.Location(location))}
		}
	}
	u, err := url.Parse(src)
	if err != nil {
		return Address{}, &UnsupportedError{Detail: fmt.Sprintf("location %q does not parse", redact.Location(location))}
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "https" {
		return Address{}, &UnsupportedError{Scheme: scheme, Detail: "only https source hosts are fetched"}
	}
	if u.Host == "" || u.User != nil {
		return Address{}, &UnsupportedError{Detail: "source URL has no host, or carries credentials"}
	}
	if strings.Contains(u.EscapedPath(), "//") {
		// An escaped slash that net/url writes back unescaped (the path
		// also holds bytes it escapes otherwise): the address would not
		// be in the location syntax (Package), where "//" is //SUBDIR.
		return Address{}, &UnsupportedError{Detail: fmt.Sprintf("source URL %s has a path holding \"//\" as a URL, which the location syntax reads as //SUBDIR", redact.URL(u))}
	}
	if u.Fragment != "" {
		u.Fragment = ""
	}
	// An empty query is written as none ("x.zip?" is "x.zip"), as it is
	// once Package adds a parameter to it.
	u.ForceQuery = false
	q := u.Query()
	a := Address{Subdir: subdir}
	if forced == "git" {
		a.Kind, a.Ref = KindGit, q.Get("ref")
		if n, err := strconv.Atoi(q.Get("depth")); err == nil && n > 0 {
			a.CloneBranch = true // as go-getter reads it
		}
		if q.Has("sshkey") {
			return Address{}, &UnsupportedError{Scheme: "ssh", Detail: "sshkey parameter"}
		}
		q.Del("ref")
		q.Del("depth")
		u.RawQuery = q.Encode()
		a.URL = u.String()
		return a, nil
	}
	format := q.Get("archive")
	if format == "" {
		for _, ext := range archiveExts {
			if strings.HasSuffix(strings.ToLower(u.Path), "."+ext) {
				format = ext
				break
			}
		}
	}
	switch {
	case slices.Contains(archiveExts, format):
	case format == "":
		return Address{}, &UnsupportedError{Detail: fmt.Sprintf("https location %s is not an archive (.tar.gz, .tgz, .tar.bz2, .tbz2, .zip or ?archive=) nor git::", redact.URL(u))}
	default:
		return Address{}, &UnsupportedError{Detail: fmt.Sprintf("archive format %q", format)}
	}
	if q.Has("checksum") {
		return Address{}, &UnsupportedError{Detail: "the checksum parameter"}
	}
	q.Del("archive")
	u.RawQuery = q.Encode()
	a.Kind, a.Format, a.URL = KindArchive, format, u.String()
	return a, nil
}

// ParseDirect parses a package URL: the location of OpenTofu's direct
// download answer (discovery.ModuleDownload.Direct), which
// is a URL, not go-getter syntax. As OpenTofu reads it, nothing of it is
// consumed (no //SUBDIR, no ?archive=, no getter prefix: the URL is
// fetched as it is), it may not have a fragment, and the archive's
// format is what its bytes are (a zip, or a tar compressed by gzip or
// bzip2; the fetch tells them apart). As every location, it must be
// https, with a host, and carry no credentials of its own. Locations
// this mirror cannot fetch are *UnsupportedError.
func ParseDirect(location string) (Address, error) {
	u, err := url.Parse(location)
	if err != nil {
		return Address{}, &UnsupportedError{Detail: fmt.Sprintf("package URL %q does not parse", redact.Location(location))}
	}
	if scheme := strings.ToLower(u.Scheme); scheme != "https" {
		return Address{}, &UnsupportedError{Scheme: scheme, Detail: "only https package URLs are fetched"}
	}
	if u.Host == "" || u.User != nil {
		return Address{}, &UnsupportedError{Detail: "package URL has no host, or carries credentials"}
	}
	if u.Fragment != "" {
		return Address{}, &UnsupportedError{Detail: fmt.Sprintf("package URL %s has a fragment, which OpenTofu refuses", redact.URL(u))}
	}
	return Address{Kind: KindArchive, URL: u.String()}, nil
}

// splitSubdir splits off go-getter's //SUBDIR, which follows the package
// address (after any scheme's "://") and ends before its query, which
// stays with the package. As go-getter, it looks for it before the query
// only: a "//" in the query (a signature's, a URL's) is the query's. The
// subdirectory is given as written.
func splitSubdir(src string) (pkg, subdir string) {
	stop := len(src)
	if i := strings.Index(src, "?"); i >= 0 {
		stop = i
	}
	offset := 0
	if i := strings.Index(src[:stop], "://"); i >= 0 {
		offset = i + 3
	}
	i := strings.Index(src[offset:stop], "//")
	if i < 0 {
		return src, ""
	}
	i += offset
	pkg, subdir = src[:i], src[i+2:]
	if q := strings.Index(subdir, "?"); q >= 0 {
		pkg += subdir[q:]
		subdir = subdir[:q]
	}
	return pkg, subdir
}

// climbsOut reports whether a //SUBDIR, cleaned, leads outside of its
// package ("../x", "a/../../x", ".."; a backslash separating, as on
// Windows), which the clients refuse.
func climbsOut(s string) bool {
	c := path.Clean(strings.ReplaceAll(s, `\`, "/"))
	return s != "" && (c == ".." || strings.HasPrefix(c, "../"))
}

// CleanSubdir returns a //SUBDIR as Parse gives it: cleaned as the
// package's names are (see cleanSubdir). A stored subdirectory that is
// not its own CleanSubdir was made under older rules.
func CleanSubdir(s string) string { return cleanSubdir(s) }

// cleanSubdir cleans a //SUBDIR as the package's names are cleaned: a
// backslash separates, as it does on Windows, where clients use it, and
// ".." stops at the package's top (on Windows, "..\.." would otherwise
// name a directory outside the package).
func cleanSubdir(s string) string {
	s = path.Clean("/" + strings.ReplaceAll(s, `\`, "/"))
	return strings.TrimPrefix(s, "/")
}
