package modsource

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	format "github.com/go-git/go-git/v5/plumbing/format/config"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/sideband"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/tfmirror/tfmirror/v2/internal/redact"
)

// commitID is a full commit id, in either case, as git checkout takes one.
var commitID = regexp.MustCompile(`^[0-9a-fA-F]{40}$`)

// fetchGit fetches the repository at repoURL shallowly at ref, writes its
// tree (submodules included, up to Limits.MaxSubmoduleDepth deep) to tw
// and returns the commit id. cloneBranch says ref is taken as go-getter
// takes it with a depth (Address.CloneBranch).
func (f *Fetcher) fetchGit(ctx context.Context, repoURL, ref string, cloneBranch bool, tw *treeWriter, tmp string, b *budget, depth int) (string, error) {
	ep, err := transport.NewEndpoint(repoURL)
	if err != nil {
		return "", fmt.Errorf("git repository URL: %w", err)
	}
	// Only this repository's requests carry its host's credential (a
	// submodule asks for its own).
	rctx := f.credentials(ctx, repoURL)
	filter := &refFilter{ref: ref}
	sess, err := githttp.NewClient(withTransport(f.HTTP, func(next http.RoundTripper) http.RoundTripper {
		filter.next = next
		return filter
	})).NewUploadPackSession(ep, nil)
	if err != nil {
		return "", err
	}
	defer sess.Close()
	adv, err := sess.AdvertisedReferencesContext(rctx)
	if err != nil {
		return "", gitError(repoURL, err)
	}
	want, err := resolveRef(adv, ref)
	if cloneBranch && err == nil {
		// `git clone --branch REF` takes a branch before a tag so named.
		if r, ok := branchRef(adv, ref); ok {
			want = r
		}
	}
	switch {
	case errors.Is(err, errAbbreviated):
		want, err = f.findAbbreviated(ctx, rctx, sess, adv, filter.tooManyRefs(), repoURL, ref, tmp)
	case err != nil:
		err = fmt.Errorf("%s: %w", redact.Location(repoURL), err)
	case !cloneBranch && otherBranch(adv, ref):
		// After go-getter's clone, `git checkout REF` takes REF for an
		// abbreviated commit id before it makes a local branch of the
		// remote one so named: the branch only when no one commit's id
		// begins so.
		id, aerr := f.findAbbreviated(ctx, rctx, sess, adv, filter.tooManyRefs(), repoURL, ref, tmp)
		var none notOneCommit
		switch {
		case aerr == nil:
			want = id
		case !errors.As(aerr, &none):
			err = fmt.Errorf("the ref %q names a branch and may be an abbreviated commit id, which git checkout takes first: %w", ref, aerr)
		}
	}
	if err != nil {
		return "", err
	}

	store := filepath.Join(tmp, fmt.Sprintf("git-%d-%s", depth, want.String()[:12]))
	storage := filesystem.NewStorage(osfs.New(store), cache.NewObjectLRU(objectCacheBytes))
	req := packp.NewUploadPackRequestFromCapabilities(adv.Capabilities)
	req.Wants = []plumbing.Hash{want}
	req.Depth = packp.DepthCommits(1)
	if err := req.Capabilities.Set(capability.Shallow); err != nil {
		return "", err
	}
	if err := f.receivePack(ctx, rctx, sess, adv, req, repoURL, tmp, storage, newPackBounds(f.Limits)); err != nil {
		return "", err
	}

	// Every object the package is read from passes through the bounds.
	var unread error
	storer := boundedObjects{EncodedObjectStorer: storage, bounds: newPackBounds(f.Limits), failed: &unread}
	commit, err := peelToCommit(storer, want)
	if err != nil {
		var le *LimitError
		if errors.As(err, &le) {
			return "", le
		}
		return "", fmt.Errorf("%s at %q: %w", redact.Location(repoURL), ref, err)
	}
	tree, err := commit.Tree()
	if err != nil {
		return "", err
	}
	var submodules []submodule
	order := treeOrder{last: map[string]orderedEntry{}, seen: map[string]bool{}}
	walker := object.NewTreeWalker(tree, true, nil)
	defer walker.Close()
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		name, entry, err := walker.Next()
		if err == io.EOF && unread != nil {
			// go-git's walker ends the walk at a tree it cannot read
			// (missing, or over its bound): the rest of the package.
			err = unread
		}
		if err == io.EOF {
			break
		}
		var le *LimitError
		if errors.As(err, &le) {
			return "", le
		}
		if err != nil {
			return "", fmt.Errorf("reading the tree of %s: %w", redact.Location(repoURL), err)
		}
		if err := order.check(name, entry); err != nil {
			return "", fmt.Errorf("the tree of %s is one Git's fsck refuses: %w", redact.Location(repoURL), err)
		}
		switch entry.Mode {
		case filemode.Dir:
			err = tw.dir(name)
		case filemode.Regular, filemode.Deprecated, filemode.Executable:
			var blob *object.Blob
			if blob, err = object.GetBlob(storer, entry.Hash); err == nil {
				var r io.ReadCloser
				if r, err = blob.Reader(); err == nil {
					err = tw.file(name, entry.Mode == filemode.Executable, blob.Size, r)
					r.Close()
				}
			}
		case filemode.Symlink:
			if isDotGitmodules(path.Base(strings.ReplaceAll(name, "\\", "/"))) {
				// Git refuses to check out such a tree ("invalid path"):
				// a link's target is no .gitmodules to fetch by.
				return "", fmt.Errorf("the tree of %s has a symbolic link %q, where Git takes no link for .gitmodules", redact.Location(repoURL), name)
			}
			var blob *object.Blob
			if blob, err = object.GetBlob(storer, entry.Hash); err == nil {
				var r io.ReadCloser
				if r, err = blob.Reader(); err == nil {
					var target []byte
					target, err = io.ReadAll(io.LimitReader(r, 4096))
					r.Close()
					if err == nil {
						err = tw.symlink(name, string(target))
					}
				}
			}
		case filemode.Submodule:
			submodules = append(submodules, submodule{path: name, commit: entry.Hash})
			err = tw.dir(name)
		}
		if err != nil {
			return "", err
		}
	}
	if len(submodules) > 0 {
		if err := f.fetchSubmodules(ctx, repoURL, tree, submodules, tw, tmp, b, depth); err != nil {
			return "", err
		}
	}
	os.RemoveAll(store) // early: a submodule-rich package may need the room
	return commit.Hash.String(), nil
}

// treeOrder refuses, entry by entry as a walk of a commit's tree gives
// them, the trees Git's fsck refuses whose entries a checkout would
// write one over another: a name twice in one tree (a file and a
// directory of one name among them, which Git's order does not put next
// to each other), a name holding a slash, and entries out of Git's order
// (by their bytes, a directory's name as if it ended in a slash), which
// a tree written by Git never holds. Each error names the entry by its
// path in the tree.
type treeOrder struct {
	// last is the last entry of each tree walked, by the tree's path
	// ("" the top).
	last map[string]orderedEntry
	// seen are the paths walked: as many as the package's entries.
	seen map[string]bool
}

// check takes in the entry e, which the walk names name (its tree's path
// and e.Name).
func (o treeOrder) check(name string, e object.TreeEntry) error {
	if strings.Contains(e.Name, "/") {
		return fmt.Errorf("its entry %q has a slash in its name", name)
	}
	if o.seen[name] {
		return fmt.Errorf("it names %q twice", name)
	}
	o.seen[name] = true
	tree := strings.TrimSuffix(name[:len(name)-len(e.Name)], "/")
	key := e.Name
	if e.Mode == filemode.Dir {
		key += "/"
	}
	if prev, ok := o.last[tree]; ok && prev.key > key {
		return fmt.Errorf("it lists %q after %q, out of Git's order of names", name, prev.name)
	}
	o.last[tree] = orderedEntry{key: key, name: name}
	return nil
}

// orderedEntry is an entry of a tree as treeOrder keeps it: the key Git
// sorts it by, and its path.
type orderedEntry struct{ key, name string }

// objectCacheBytes bounds the objects go-git keeps of a storage it reads
// a package from (its default, 96 MiB, held that much of a pack of small
// objects): the pack indexPack writes holds no delta, so that reading an
// object costs the same with or without its base kept.
const objectCacheBytes = 1 * cache.MiByte

// receivePack sends req (to the server that advertised adv) and writes
// the pack it is answered with to storage: spooled (within the download
// limit), its objects' number and declared sizes checked against bounds
// before go-git indexes it.
func (f *Fetcher) receivePack(ctx, rctx context.Context, sess transport.UploadPackSession, adv *packp.AdvRefs, req *packp.UploadPackRequest, repoURL, tmp string, storage *filesystem.Storage, bounds packBounds) error {
	if adv.Capabilities.Supports(capability.NoProgress) {
		req.Capabilities.Set(capability.NoProgress) //nolint:errcheck // optional
	}
	resp, err := sess.UploadPack(rctx, req)
	if err != nil {
		return gitError(repoURL, err)
	}
	var pack io.Reader = resp // counted, with the lines before it, by the fetch's meter
	switch {
	case req.Capabilities.Supports(capability.Sideband64k):
		pack = sideband.NewDemuxer(sideband.Sideband64k, pack)
	case req.Capabilities.Supports(capability.Sideband):
		pack = sideband.NewDemuxer(sideband.Sideband, pack)
	}
	spool, err := os.CreateTemp(tmp, "pack-*")
	if err != nil {
		resp.Close()
		return err
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	_, err = io.Copy(spool, pack)
	resp.Close()
	if err == nil {
		_, err = spool.Seek(0, io.SeekStart)
	}
	if err == nil {
		err = checkPack(ctx, bufio.NewReader(spool), bounds)
	}
	if err == nil {
		if _, err = spool.Seek(0, io.SeekStart); err == nil {
			err = indexPack(ctx, spool, storage.Filesystem())
		}
	}
	if err != nil {
		var le *LimitError
		if errors.As(err, &le) {
			return le
		}
		if ctx.Err() != nil {
			return err
		}
		return gitError(repoURL, err)
	}
	return nil
}

// maxHistoryRefs bounds the branches and tags whose history an
// abbreviated commit id is looked for in (go-git keeps each ref it is
// passed in memory, some 200 bytes); maxHistoryCommits the objects of
// that history, which indexing takes some 440 bytes of memory for each:
// together some 11 MiB, within MemoryOverhead.
const (
	maxHistoryRefs    = 10000
	maxHistoryCommits = 20000
)

// findAbbreviated finds the one object whose id begins with ref (an
// abbreviated id, as `git checkout` takes one after go-getter's clone)
// in the history of the repository's branches and tags: a partial fetch
// of their commits and annotated tags alone (filter tree:0), which the
// server must offer. That object is a commit or an annotated tag of one
// (the commit is returned); several are ambiguous, as to `git checkout`.
// A tree or blob is not fetched, so one whose id begins with ref too
// (which `git checkout` would find ambiguous) is not seen.
// tooMany says its ref advertisement held more branches and tags than
// maxHistoryRefs.
func (f *Fetcher) findAbbreviated(ctx, rctx context.Context, sess transport.UploadPackSession, adv *packp.AdvRefs, tooMany bool, repoURL, ref, tmp string) (plumbing.Hash, error) {
	if !adv.Capabilities.Supports(capability.Filter) {
		return plumbing.ZeroHash, fmt.Errorf("%s: no tag or branch %q, and its Git server offers no partial fetch (filter), which finding an abbreviated commit id takes without the whole repository: give the whole 40-hex id", redact.Location(repoURL), ref)
	}
	if tooMany {
		return plumbing.ZeroHash, &LimitError{Detail: fmt.Sprintf("its Git repository has more than %d branches and tags to look for the abbreviated commit id %q in", maxHistoryRefs, ref)}
	}
	refs, err := adv.AllReferences()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	seen := map[plumbing.Hash]bool{}
	var wants []plumbing.Hash
	for _, r := range refs {
		if r.Type() != plumbing.HashReference || !(r.Name() == plumbing.HEAD || r.Name().IsBranch() || r.Name().IsTag()) || seen[r.Hash()] {
			continue
		}
		seen[r.Hash()] = true
		wants = append(wants, r.Hash())
	}
	if len(wants) == 0 {
		return plumbing.ZeroHash, fmt.Errorf("%s: no tag, branch or commit %q (the repository has no branch or tag)", redact.Location(repoURL), ref)
	}
	slices.SortFunc(wants, func(a, b plumbing.Hash) int { return bytes.Compare(a[:], b[:]) })
	req := packp.NewUploadPackRequestFromCapabilities(adv.Capabilities)
	req.Wants = wants
	req.Filter = packp.FilterTreeDepth(0)
	if err := req.Capabilities.Set(capability.Filter); err != nil {
		return plumbing.ZeroHash, err
	}
	dir, err := os.MkdirTemp(tmp, "history-*")
	if err != nil {
		return plumbing.ZeroHash, err
	}
	defer os.RemoveAll(dir)
	storage := filesystem.NewStorage(osfs.New(dir), cache.NewObjectLRU(objectCacheBytes))
	bounds := newPackBounds(f.Limits)
	bounds.objects, bounds.history = maxHistoryCommits, true
	if err := f.receivePack(ctx, rctx, sess, adv, req, repoURL, tmp, storage, bounds); err != nil {
		return plumbing.ZeroHash, err
	}
	// Every object of the pack is a candidate, as `git checkout` takes
	// any object's id: its commits and annotated tags (trees and blobs
	// it holds only where a ref names one).
	iter, err := storage.IterEncodedObjects(plumbing.AnyObject)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	prefix := strings.ToLower(ref)
	// Their ids and types alone are kept, each id once: as many as the
	// history holds may match.
	found := map[plumbing.Hash]plumbing.ObjectType{}
	err = iter.ForEach(func(o plumbing.EncodedObject) error {
		if h := o.Hash(); strings.HasPrefix(h.String(), prefix) {
			found[h] = o.Type()
		}
		return ctx.Err()
	})
	if err != nil {
		return plumbing.ZeroHash, err
	}
	switch len(found) {
	case 0:
		return plumbing.ZeroHash, notOneCommit{fmt.Errorf("%s: no tag, branch or commit %q (no commit or annotated tag of the branches' and tags' history has an id beginning so)", redact.Location(repoURL), ref)}
	case 1:
		var only plumbing.Hash
		for h := range found {
			only = h
		}
		h, err := historyCommit(storage, only)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("%s: the abbreviated id %q names %w", redact.Location(repoURL), ref, err)
		}
		return h, nil
	}
	return plumbing.ZeroHash, notOneCommit{fmt.Errorf("%s: the abbreviated commit id %q is ambiguous: the ids of %s begin so; give more of it, or the whole 40-hex id", redact.Location(repoURL), ref, countTypes(found))}
}

// notOneCommit is findAbbreviated's error for an id that no object of
// the history, or several, begin with: `git checkout` then makes a local
// branch of the remote one so named, if there is one.
type notOneCommit struct{ error }

func (e notOneCommit) Unwrap() error { return e.error }

// branchRef is the commit of the branch ref, when the advertisement has
// one so named.
func branchRef(adv *packp.AdvRefs, ref string) (plumbing.Hash, bool) {
	refs, err := adv.AllReferences()
	if err != nil || ref == "" || commitID.MatchString(ref) {
		return plumbing.ZeroHash, false
	}
	r, ok := refs[plumbing.NewBranchReferenceName(ref)]
	if !ok || r.Type() != plumbing.HashReference {
		return plumbing.ZeroHash, false
	}
	return r.Hash(), true
}

// otherBranch reports whether ref, which resolveRef found, is a branch
// other than the remote's default one and may be an abbreviated commit
// id: go-getter's clone has the default branch alone as a local branch,
// and `git checkout` looks for a tag or local branch so named, then for
// a commit whose id begins so, and only then for a remote branch.
// Without HEAD's target advertised, the default branch is one at HEAD's
// commit.
func otherBranch(adv *packp.AdvRefs, ref string) bool {
	if !abbreviated.MatchString(ref) {
		return false
	}
	refs, err := adv.AllReferences()
	if err != nil {
		return false
	}
	branch := plumbing.NewBranchReferenceName(ref)
	b, ok := refs[branch]
	if _, tag := refs[plumbing.NewTagReferenceName(ref)]; !ok || tag {
		return false
	}
	head, ok := refs[plumbing.HEAD]
	switch {
	case !ok:
		return true
	case head.Type() == plumbing.SymbolicReference:
		return head.Target() != branch
	}
	return head.Hash() != b.Hash()
}

// historyCommit is the commit h (an object of the history
// findAbbreviated fetched, which holds whatever its tips reach but trees
// and blobs) is, or that it points to as an annotated tag (of a tag,
// ...), as `git checkout` peels it; what is no commit is refused, the
// error saying what it names ("a tree, not a commit").
func historyCommit(s storer.EncodedObjectStorer, h plumbing.Hash) (plumbing.Hash, error) {
	for range 10 {
		o, err := s.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		switch o.Type() {
		case plumbing.CommitObject:
			return h, nil
		case plumbing.TagObject:
			tag, err := object.DecodeTag(s, o)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			if tag.TargetType != plumbing.CommitObject && tag.TargetType != plumbing.TagObject {
				return plumbing.ZeroHash, fmt.Errorf("an annotated tag of a %s, not a commit", tag.TargetType)
			}
			h = tag.Target
		default:
			return plumbing.ZeroHash, fmt.Errorf("a %s, not a commit", o.Type())
		}
	}
	return plumbing.ZeroHash, errors.New("a chain of more than 10 annotated tags")
}

// countTypes says how many objects of each type found holds, as "2
// commits" or "1 commit and 1 annotated tag".
func countTypes(found map[plumbing.Hash]plumbing.ObjectType) string {
	n := map[plumbing.ObjectType]int{}
	for _, typ := range found {
		n[typ]++
	}
	var parts []string
	for _, t := range []struct {
		typ  plumbing.ObjectType
		name string
	}{{plumbing.CommitObject, "commit"}, {plumbing.TagObject, "annotated tag"}, {plumbing.TreeObject, "tree"}, {plumbing.BlobObject, "blob"}} {
		if n[t.typ] == 1 {
			parts = append(parts, "1 "+t.name)
		} else if n[t.typ] > 1 {
			parts = append(parts, fmt.Sprintf("%d %ss", n[t.typ], t.name))
		}
	}
	if len(parts) > 1 {
		return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
	}
	return strings.Join(parts, "")
}

// maxSubmodules bounds the Git submodules of one package, nested ones
// included: each is a fetch (two requests or more) from a host the
// repository names, and the entries allowed would otherwise let a package
// of a few kilobytes make thousands.
const maxSubmodules = 64

// maxGitmodulesBytes bounds the .gitmodules parsed: go-git's parser looks
// each section up among those before it, so its time grows with the
// square of the sections (8 MiB of them took hours of CPU, which no
// deadline stops), and maxSubmodules need a few KiB.
const maxGitmodulesBytes = 256 << 10

type submodule struct {
	path   string
	commit plumbing.Hash
}

// fetchSubmodules fetches each submodule at its recorded commit into its
// directory, as go-getter's `git submodule update --init --recursive`
// (which leaves out one whose .gitmodules entry says update = none),
// through the package's one tree writer (a submodule's links are checked
// with the whole package's).
func (f *Fetcher) fetchSubmodules(ctx context.Context, parentURL string, tree *object.Tree, subs []submodule, tw *treeWriter, tmp string, b *budget, depth int) error {
	if depth+1 > f.Limits.MaxSubmoduleDepth {
		return &LimitError{Detail: fmt.Sprintf("Git submodules nested more than %d deep", f.Limits.MaxSubmoduleDepth)}
	}
	// Each is a fetch from a host the repository names: counted before
	// any is fetched.
	if b.submodules += len(subs); b.submodules > maxSubmodules {
		return &LimitError{Detail: fmt.Sprintf("more than %d Git submodules in all", maxSubmodules)}
	}
	gm, err := tree.File(".gitmodules")
	if err != nil {
		return fmt.Errorf("%s has submodules but no .gitmodules", redact.Location(parentURL))
	}
	if gm.Size > maxGitmodulesBytes {
		return &LimitError{Detail: fmt.Sprintf("its .gitmodules is %d bytes, more than the %d read", gm.Size, maxGitmodulesBytes)}
	}
	content, err := gm.Contents()
	if err != nil {
		return err
	}
	mods := config.NewModules()
	if err := mods.Unmarshal([]byte(content)); err != nil {
		return fmt.Errorf("%s: .gitmodules: %w", redact.Location(parentURL), err)
	}
	// What go-git's Submodule does not keep: update = none, which `git
	// submodule update` leaves out (its directory empty).
	raw := format.New()
	if err := format.NewDecoder(strings.NewReader(content)).Decode(raw); err != nil {
		return fmt.Errorf("%s: .gitmodules: %w", redact.Location(parentURL), err)
	}
	for _, s := range subs {
		// The section of the path is the last naming it, as Git reads
		// .gitmodules: its URL and update go together (go-git's map of
		// the sections gives either of two naming one path). A section
		// names the path exactly as the walk does, as Git matches them:
		// "./sub" or "sub/" names no submodule (Git fails on the
		// submodule sub, finding no URL for it), nor does a path with a
		// ".." part, which no name of the walk has.
		var rawURL, update string
		for _, m := range raw.Section("submodule").Subsections {
			if m.Option("path") == s.path {
				rawURL, update = m.Option("url"), m.Option("update")
			}
		}
		if update == "none" {
			continue
		}
		if rawURL == "" {
			return fmt.Errorf("%s: submodule %q is not in .gitmodules (Git matches a section's path to it as written: \"./%s\" or \"%s/\" is not it)", redact.Location(parentURL), s.path, s.path, s.path)
		}
		subURL, err := resolveSubmoduleURL(parentURL, rawURL)
		if err != nil {
			return err
		}
		sub, ok := tw.sub(s.path)
		if !ok {
			continue // left out of the package (.git)
		}
		if _, err := f.fetchGit(ctx, subURL, s.commit.String(), false, sub, tmp, b, depth+1); err != nil {
			return fmt.Errorf("submodule %s: %w", s.path, err)
		}
	}
	return nil
}

// resolveSubmoduleURL resolves a .gitmodules URL (absolute https, or
// relative to the parent repository's URL as Git resolves it). The
// mirror sends a source host only the credential the operator tied to
// it: a URL that carries a password is refused; a user name alone (a
// hosting service's clone URL, https://USER@HOST/..., which Git fetches
// a public repository with as well) is dropped, never sent nor shown.
// Errors name the URL without userinfo.
func resolveSubmoduleURL(parent, raw string) (string, error) {
	if strings.HasPrefix(raw, "./") || strings.HasPrefix(raw, "../") {
		p, err := url.Parse(parent)
		if err != nil {
			return "", err
		}
		p.Path = path.Join(strings.TrimSuffix(p.Path, "/"), raw)
		p.RawQuery = ""
		return p.String(), nil
	}
	u, err := url.Parse(raw)
	if err != nil || strings.ToLower(u.Scheme) != "https" || u.Host == "" {
		scheme := "ssh"
		if err == nil && u.Scheme != "" {
			scheme = u.Scheme
		}
		return "", &UnsupportedError{Scheme: scheme, Detail: fmt.Sprintf("submodule URL %q", redact.Location(raw))}
	}
	if _, ok := u.User.Password(); ok {
		return "", &UnsupportedError{Detail: fmt.Sprintf("submodule URL %q carries a password, which the mirror never uses: it fetches a submodule with the credential --module-source-credentials ties to its host, or anonymously", redact.URL(u))}
	}
	u.User = nil
	return u.String(), nil
}

// resolveRef finds what to fetch for ref: a commit id as is, else a tag,
// else a branch, and "" the default branch (HEAD).
func resolveRef(adv *packp.AdvRefs, ref string) (plumbing.Hash, error) {
	if commitID.MatchString(ref) {
		return plumbing.NewHash(ref), nil
	}
	refs, err := adv.AllReferences()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	names := []plumbing.ReferenceName{plumbing.HEAD}
	if ref != "" {
		names = []plumbing.ReferenceName{plumbing.NewTagReferenceName(ref), plumbing.NewBranchReferenceName(ref), plumbing.ReferenceName(ref)}
	}
	for _, n := range names {
		r, ok := refs[n]
		if !ok {
			continue
		}
		if r.Type() == plumbing.SymbolicReference {
			if t, ok := refs[r.Target()]; ok {
				r = t
			} else if adv.Head != nil {
				return *adv.Head, nil
			}
		}
		if r.Type() == plumbing.HashReference {
			return r.Hash(), nil
		}
	}
	if ref == "" && adv.Head != nil {
		return *adv.Head, nil
	}
	if abbreviated.MatchString(ref) {
		// go-getter's clone checks it out: findAbbreviated looks for it
		// in the history.
		return plumbing.ZeroHash, errAbbreviated
	}
	return plumbing.ZeroHash, fmt.Errorf("no tag, branch or commit %q", ref)
}

// errAbbreviated is resolveRef's answer for a ref that names no branch or
// tag and may be an abbreviated commit id.
var errAbbreviated = errors.New("may be an abbreviated commit id")

// abbreviated is what may be an abbreviated commit id, as Git takes one
// (4 hex digits at least).
var abbreviated = regexp.MustCompile(`^[0-9a-fA-F]{4,39}$`)

// boundedObjects is a repository's objects as the package is read from
// them: a commit, tag or tree larger than its type allows (packBounds) is
// refused with a *LimitError before go-git decodes it, which takes far
// more memory than its bytes (an entry for each line of a tree). checkPack
// bounds each object the pack's headers say the type of; a reference
// delta's type is known only once go-git has made it, and this is where
// it is bounded.
type boundedObjects struct {
	storer.EncodedObjectStorer
	bounds packBounds
	// failed, when not nil, is set to the first error of an object not
	// given: go-git's tree walker takes one for the walk's end.
	failed *error
}

func (s boundedObjects) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	o, err := s.EncodedObjectStorer.EncodedObject(t, h)
	if err == nil {
		if bound, over, setting := s.bounds.of(o.Type(), o.Size()); bound > 0 && o.Size() > bound {
			err = &LimitError{Detail: over, Setting: setting}
		}
	}
	if err != nil {
		if s.failed != nil && *s.failed == nil {
			*s.failed = fmt.Errorf("the object %s: %w", h, err)
		}
		return nil, err
	}
	return o, nil
}

// peelToCommit follows annotated tags to the commit.
func peelToCommit(s storer.EncodedObjectStorer, h plumbing.Hash) (*object.Commit, error) {
	for range 10 {
		obj, err := object.GetObject(s, h)
		if err != nil {
			return nil, err
		}
		switch o := obj.(type) {
		case *object.Commit:
			return o, nil
		case *object.Tag:
			h = o.Target
		default:
			return nil, fmt.Errorf("ref names a %s, not a commit", obj.Type())
		}
	}
	return nil, errors.New("tag chain too long")
}

// gitError makes a go-git transport error say which repository.
func gitError(repoURL string, err error) error {
	// go-git and net/http name the request URL in their messages.
	err = redact.Error(err, repoURL)
	// For a 401, 403 or 404 go-git's error holds the source host's page
	// (transport/http.NewErr), which may echo the request and the
	// credential it carried: only go-git's sentinel is kept, as an
	// archive's refusal is said by its status alone.
	const tied = "a source host's credentials are used only for the origins the operator tied them to"
	var refusal error
	what := "needs credentials (" + tied + ")"
	switch {
	case errors.Is(err, transport.ErrRepositoryNotFound):
		refusal, what = transport.ErrRepositoryNotFound, "not found (or not public: "+tied+")"
	case errors.Is(err, transport.ErrAuthenticationRequired):
		refusal = transport.ErrAuthenticationRequired
	case errors.Is(err, transport.ErrAuthorizationFailed):
		refusal = transport.ErrAuthorizationFailed
	}
	if refusal != nil {
		return fmt.Errorf("%w: git repository %s %s: %w", ErrSource, redact.Location(repoURL), what, refusal)
	}
	return fmt.Errorf("git repository %s: %w", redact.Location(repoURL), err)
}
