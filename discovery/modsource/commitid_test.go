package modsource

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// stockGitServer serves the bare repositories under root with `git
// http-backend` as Git ships it: no uploadpack.allowAnySHA1InWant, so a
// protocol v0 client may want only what the server advertises.
func stockGitServer(t testing.TB, root string) (*httptest.Server, *http.Client) {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip(err)
	}
	srv := httptest.NewTLSServer(&cgi.Handler{Path: git, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}})
	t.Cleanup(srv.Close)
	return srv, srv.Client()
}

func runGitT(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// newWorkRepo makes a Git working repository, branch main, at
// ROOT/work; root is a temporary directory for the bare ones beside it.
func newWorkRepo(t testing.TB) (root, work string) {
	t.Helper()
	needGit(t)
	root = t.TempDir()
	work = filepath.Join(root, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	runGitT(t, work, "init", "-q", "-b", "main")
	return root, work
}

// commitMainTF commits main.tf holding content in work and returns the
// commit's id.
func commitMainTF(t *testing.T, work, content string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(work, "main.tf"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	runGitT(t, work, "add", ".")
	runGitT(t, work, "commit", "-q", "-m", content)
	return runGitT(t, work, "rev-parse", "HEAD")
}

// fastImport makes the commits of a git fast-import stream in work at
// once.
func fastImport(t testing.TB, work, stream string) {
	t.Helper()
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir, cmd.Stdin = work, strings.NewReader(stream)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git fast-import: %v\n%s", err, out)
	}
}

// filterBare clones work bare as ROOT/name, serving partial fetches
// (uploadpack.allowFilter, as the hosted forges do), and returns its path.
func filterBare(t testing.TB, root, work, name string) string {
	t.Helper()
	bare := filepath.Join(root, name)
	runGitT(t, root, "clone", "-q", "--bare", work, bare)
	runGitT(t, bare, "config", "uploadpack.allowFilter", "true")
	return bare
}

// A ref that is the full id of a commit, in either case, is that commit,
// as go-getter's `git checkout ID` takes it: one that no branch or tag
// names too (the commit a registry pinned, after its branch moved on),
// from a Git server as Git ships it (smart HTTP lets a client want any
// commit a ref reaches).
func TestFetchGitCommitIDEitherCase(t *testing.T) {
	root, work := newWorkRepo(t)
	first := commitMainTF(t, work, "# one\n")
	commitMainTF(t, work, "# two\n")
	runGitT(t, root, "clone", "-q", "--bare", work, filepath.Join(root, "repo.git"))

	srv, c := stockGitServer(t, root)
	f := &Fetcher{HTTP: c, Limits: defaultLimits, TempDir: t.TempDir()}
	for _, ref := range []string{first, strings.ToUpper(first)} {
		var buf bytes.Buffer
		res, err := f.Fetch(context.Background(), Address{Kind: KindGit, URL: srv.URL + "/repo.git", Ref: ref}, &buf)
		if err != nil {
			t.Errorf("ref %s: %v", ref, err)
			continue
		}
		if res.Commit != first {
			t.Errorf("ref %s: commit %s, want %s", ref, res.Commit, first)
		}
		if got := readTarGz(t, buf.Bytes())["main.tf"]; got != "# one\n" {
			t.Errorf("ref %s: main.tf = %q, want the first commit's", ref, got)
		}
	}
}

// A ref that is an abbreviated commit id, in either case, is the one
// commit of the branches' and tags' history whose id begins so, as
// go-getter's clone and `git checkout ID` take it: one no ref names
// (an old commit of main, a commit of another branch alone), from a Git
// server that offers partial fetches (uploadpack.allowFilter, as the
// hosted forges do). One a server without them cannot find, an id no
// commit has, and one several commits' ids begin with are refused saying
// so.
func TestFetchGitAbbreviatedCommitID(t *testing.T) {
	root, work := newWorkRepo(t)
	first := commitMainTF(t, work, "# one\n")
	commitMainTF(t, work, "# two\n")
	runGitT(t, work, "tag", "-a", "-m", "v1", "v1")
	runGitT(t, work, "checkout", "-q", "-b", "feature", first)
	feature := commitMainTF(t, work, "# feature\n")
	runGitT(t, work, "checkout", "-q", "main")
	commitMainTF(t, work, "# three\n")
	filterBare(t, root, work, "filter.git")
	runGitT(t, root, "clone", "-q", "--bare", work, filepath.Join(root, "stock.git"))

	srv, c := stockGitServer(t, root)
	f := &Fetcher{HTTP: c, Limits: defaultLimits, TempDir: t.TempDir()}
	fetch := func(repo, ref string) (Result, map[string]string, error) {
		var buf bytes.Buffer
		res, err := f.Fetch(context.Background(), Address{Kind: KindGit, URL: srv.URL + "/" + repo, Ref: ref}, &buf)
		if err != nil {
			return res, nil, err
		}
		return res, readTarGz(t, buf.Bytes()), nil
	}
	for _, tc := range []struct{ ref, commit, file string }{
		{first[:7], first, "# one\n"},
		{strings.ToUpper(first[:10]), first, "# one\n"},
		{feature[:12], feature, "# feature\n"},
	} {
		res, files, err := fetch("filter.git", tc.ref)
		if err != nil {
			t.Errorf("ref %s: %v", tc.ref, err)
			continue
		}
		if res.Commit != tc.commit || files["main.tf"] != tc.file {
			t.Errorf("ref %s: commit %s with main.tf %q, want %s with %q", tc.ref, res.Commit, files["main.tf"], tc.commit, tc.file)
		}
	}

	_, _, err := fetch("stock.git", first[:7])
	if !errors.Is(err, ErrBadPackage) || !strings.Contains(err.Error(), "offers no partial fetch") || !strings.Contains(err.Error(), "give the whole 40-hex id") {
		t.Errorf("abbreviated id from a server without partial fetches: %v, want ErrBadPackage saying to give the whole id", err)
	}
	// An id no commit has: every hex digit but the first one of each
	// commit's id.
	ids := runGitT(t, work, "rev-list", "--all")
	missing := ""
	for _, d := range "0123456789abcdef" {
		if !strings.Contains("\n"+ids, "\n"+string(d)) {
			missing = strings.Repeat(string(d), 8)
			break
		}
	}
	if _, _, err := fetch("filter.git", missing); !errors.Is(err, ErrBadPackage) || !strings.Contains(err.Error(), `no tag, branch or commit "`+missing+`"`) {
		t.Errorf("abbreviated id no commit has: %v, want ErrBadPackage saying there is none", err)
	}
}

// An abbreviated id that two commits' ids begin with is refused as
// ambiguous, as `git checkout` refuses it, rather than either commit
// served.
func TestFetchGitAbbreviatedCommitIDAmbiguous(t *testing.T) {
	root, work := newWorkRepo(t)
	// Commits made at once (fast-import) until two ids share their first
	// four hex digits: among 2,000 of 65,536 prefixes, all but certain.
	var stream strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&stream, "commit refs/heads/main\ncommitter t <t@t> %d +0000\ndata 4\n%04d\nM 644 inline main.tf\ndata 5\n%04d\n\n", 1700000000+i, i%10000, i)
	}
	fastImport(t, work, stream.String())
	seen := map[string]bool{}
	prefix := ""
	for _, id := range strings.Fields(runGitT(t, work, "rev-list", "main")) {
		if seen[id[:4]] {
			prefix = id[:4]
			break
		}
		seen[id[:4]] = true
	}
	if prefix == "" {
		t.Fatal("no two of 2,000 commits share four hex digits")
	}
	filterBare(t, root, work, "repo.git")
	srv, c := stockGitServer(t, root)
	f := &Fetcher{HTTP: c, Limits: defaultLimits, TempDir: t.TempDir()}
	_, err := f.Fetch(context.Background(), Address{Kind: KindGit, URL: srv.URL + "/repo.git", Ref: prefix}, io.Discard)
	if !errors.Is(err, ErrBadPackage) || !strings.Contains(err.Error(), "commits begin so") {
		t.Errorf("ref %s: %v, want ErrBadPackage saying it is ambiguous", prefix, err)
	}
}

// An abbreviated id may be an annotated tag object's, as `git checkout`
// takes one after go-getter's clone: it is the commit the tag points to
// (through a tag of a tag too), as the whole 40-hex id of the tag is.
// One of a tag of a tree is refused saying so. Before, an abbreviated
// tag id was refused as no tag, branch or commit.
func TestFetchGitAbbreviatedTagObjectID(t *testing.T) {
	root, work := newWorkRepo(t)
	id := commitMainTF(t, work, "# one\n")
	runGitT(t, work, "tag", "-a", "-m", "v", "v1")
	runGitT(t, work, "tag", "-a", "-m", "v", "v1-signed", "v1")
	commitMainTF(t, work, "# two\n")
	runGitT(t, work, "tag", "-a", "-m", "tree", "tree", "HEAD^{tree}")
	tagObj := runGitT(t, work, "rev-parse", "v1")
	tagOfTag := runGitT(t, work, "rev-parse", "v1-signed")
	treeTag := runGitT(t, work, "rev-parse", "tree")
	filterBare(t, root, work, "repo.git")
	clone := filepath.Join(root, "clone")
	runGitT(t, root, "clone", "-q", filepath.Join(root, "repo.git"), clone)
	for _, ref := range []string{tagObj[:10], tagOfTag[:10]} {
		runGitT(t, clone, "checkout", "-q", ref)
		if got := runGitT(t, clone, "rev-parse", "HEAD"); got != id {
			t.Fatalf("git checkout %s: HEAD %s, want %s", ref, got, id)
		}
	}

	srv, c := stockGitServer(t, root)
	f := &Fetcher{HTTP: c, Limits: defaultLimits, TempDir: t.TempDir()}
	for _, ref := range []string{tagObj[:10], strings.ToUpper(tagObj[:7]), tagOfTag[:10], tagObj} {
		var buf bytes.Buffer
		res, err := f.Fetch(context.Background(), Address{Kind: KindGit, URL: srv.URL + "/repo.git", Ref: ref}, &buf)
		if err != nil || res.Commit != id {
			t.Errorf("ref %s (annotated tag of commit %s): %v, %v", ref, id, res.Commit, err)
			continue
		}
		if got := readTarGz(t, buf.Bytes())["main.tf"]; got != "# one\n" {
			t.Errorf("ref %s: main.tf = %q, want the tagged commit's", ref, got)
		}
	}
	_, err := f.Fetch(context.Background(), Address{Kind: KindGit, URL: srv.URL + "/repo.git", Ref: treeTag[:10]}, io.Discard)
	if !errors.Is(err, ErrBadPackage) || !strings.Contains(err.Error(), "tree, not a commit") {
		t.Errorf("abbreviated id of a tag of a tree: %v, want ErrBadPackage saying it is no commit", err)
	}
}

// An abbreviated id that a commit's id and an annotated tag object's
// both begin with is refused as ambiguous, as `git checkout` refuses it
// ("short object ID ... is ambiguous"), rather than the commit served.
func TestFetchGitAbbreviatedCommitIDAmbiguousWithTag(t *testing.T) {
	root, work := newWorkRepo(t)
	id := commitMainTF(t, work, "# one\n")
	commitMainTF(t, work, "# two\n")
	// A tag object of the first commit whose id begins with the same 5
	// hex digits: some million tries.
	var content []byte
	var tagID string
	for i := 0; ; i++ {
		content = fmt.Appendf(content[:0], "object %s\ntype commit\ntag c%d\ntagger t <t@t> 1700000000 +0000\n\nm\n", id, i)
		sum := sha1.Sum(append(fmt.Appendf(nil, "tag %d\x00", len(content)), content...))
		if tagID = hex.EncodeToString(sum[:]); tagID[:5] == id[:5] {
			break
		}
	}
	cmd := exec.Command("git", "hash-object", "-t", "tag", "-w", "--stdin")
	cmd.Dir, cmd.Stdin = work, bytes.NewReader(content)
	if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != tagID {
		t.Fatalf("git hash-object: %s %v, want %s", out, err, tagID)
	}
	runGitT(t, work, "update-ref", "refs/tags/collide", tagID)
	filterBare(t, root, work, "repo.git")
	clone := filepath.Join(root, "clone")
	runGitT(t, root, "clone", "-q", filepath.Join(root, "repo.git"), clone)
	checkout := exec.Command("git", "checkout", "-q", id[:5])
	checkout.Dir = clone
	if out, err := checkout.CombinedOutput(); err == nil || !strings.Contains(string(out), "ambiguous") {
		t.Fatalf("git checkout %s (commit %s, tag %s): %v, want it refused as ambiguous\n%s", id[:5], id, tagID, err, out)
	}

	srv, c := stockGitServer(t, root)
	f := &Fetcher{HTTP: c, Limits: defaultLimits, TempDir: t.TempDir()}
	res, err := f.Fetch(context.Background(), Address{Kind: KindGit, URL: srv.URL + "/repo.git", Ref: id[:5]}, io.Discard)
	if !errors.Is(err, ErrBadPackage) || !strings.Contains(err.Error(), "is ambiguous: the ids of 1 commit and 1 annotated tag begin so") {
		t.Errorf("ref %s (commit %s, tag %s): %v, %v; want ErrBadPackage saying it is ambiguous", id[:5], id, tagID, res.Commit, err)
	}
	// Longer, it is the one or the other.
	for _, want := range []string{id, tagID} {
		if res, err := f.Fetch(context.Background(), Address{Kind: KindGit, URL: srv.URL + "/repo.git", Ref: want[:12]}, io.Discard); err != nil || res.Commit != id {
			t.Errorf("ref %s: %v, %v; want %s", want[:12], res.Commit, err, id)
		}
	}
}

// annotatedTagRefs makes the bare repository's refs branch main at
// commit id and tags t00000... (n of them), each the annotated tag
// object tagObj (of commit id) with its peeled line, as git pack-refs
// writes them: n+1 branches and tags, advertised on 2n+1 lines.
func annotatedTagRefs(t *testing.T, bare, id, tagObj string, n int) {
	t.Helper()
	var refs strings.Builder
	refs.WriteString("# pack-refs with: peeled fully-peeled sorted \n")
	refs.WriteString(id + " refs/heads/main\n")
	for i := range n {
		fmt.Fprintf(&refs, "%s refs/tags/t%05d\n^%s\n", tagObj, i, id)
	}
	if err := os.WriteFile(filepath.Join(bare, "packed-refs"), []byte(refs.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(bare, "refs", "heads", "main"))
	os.RemoveAll(filepath.Join(bare, "refs", "tags"))
}

// An annotated tag is one of the branches and tags an abbreviated id is
// looked for among, however its ref is advertised (its name, then the
// commit it peels to as NAME^{}): a repository of maxHistoryRefs
// branches and tags, all but one annotated tags, has the id found.
// Before, the peeled line counted as a second ref, and a repository of
// 6,000 annotated tags was refused as having "more than 10000 branches
// and tags".
func TestFetchGitAbbreviatedCommitIDAnnotatedTagsCountOnce(t *testing.T) {
	root, work := newWorkRepo(t)
	id := commitMainTF(t, work, "# one\n")
	runGitT(t, work, "tag", "-a", "-m", "v", "v0")
	tagObj := runGitT(t, work, "rev-parse", "v0")
	bare := filterBare(t, root, work, "repo.git")
	annotatedTagRefs(t, bare, id, tagObj, maxHistoryRefs-1)
	srv, c := stockGitServer(t, root)
	f := &Fetcher{HTTP: c, Limits: Limits{MaxDownloadBytes: 4 << 20, MaxTreeBytes: 1 << 20, MaxEntries: 100, MaxSubmoduleDepth: 2}, TempDir: t.TempDir()}
	res, err := f.Fetch(context.Background(), Address{Kind: KindGit, URL: srv.URL + "/repo.git", Ref: id[:8]}, io.Discard)
	if err != nil || res.Commit != id {
		t.Errorf("abbreviated id among %d branches and tags (%d annotated tags): %v, %v; want %s", maxHistoryRefs, maxHistoryRefs-1, res.Commit, err, id)
	}
}

// The branches and tags an abbreviated id is looked for among are
// bounded (maxHistoryRefs): a repository advertising more is refused
// with a *LimitError, having held no more than that many of them. Its
// annotated tags count once each (TestFetchGitAbbreviatedCommitIDAnnotatedTagsCountOnce
// has one fewer found).
func TestFetchGitAbbreviatedCommitIDTooManyRefs(t *testing.T) {
	root, work := newWorkRepo(t)
	id := commitMainTF(t, work, "# one\n")
	runGitT(t, work, "tag", "-a", "-m", "v", "v0")
	tagObj := runGitT(t, work, "rev-parse", "v0")
	bare := filterBare(t, root, work, "repo.git")
	annotatedTagRefs(t, bare, id, tagObj, maxHistoryRefs)
	srv, c := stockGitServer(t, root)
	f := &Fetcher{HTTP: c, Limits: Limits{MaxDownloadBytes: 4 << 20, MaxTreeBytes: 1 << 20, MaxEntries: 100, MaxSubmoduleDepth: 2}, TempDir: t.TempDir()}
	_, err := f.Fetch(context.Background(), Address{Kind: KindGit, URL: srv.URL + "/repo.git", Ref: id[:8]}, io.Discard)
	var le *LimitError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "more than 10000 branches and tags") {
		t.Errorf("abbreviated id among %d refs: %v, want a *LimitError saying there are too many", maxHistoryRefs+1, err)
	}
	// A tag among them (the last) is found by its name all the same.
	if res, err := f.Fetch(context.Background(), Address{Kind: KindGit, URL: srv.URL + "/repo.git", Ref: "t09999"}, io.Discard); err != nil || res.Commit != id {
		t.Errorf("tag t09999: %v, %v", res.Commit, err)
	}
}

// The history an abbreviated id is looked for in is bounded
// (maxHistoryCommits): a longer one is refused with a *LimitError from
// its pack's header, before go-git indexes it.
func TestFetchGitAbbreviatedCommitIDLongHistory(t *testing.T) {
	root, work := newWorkRepo(t)
	var stream strings.Builder
	for i := range maxHistoryCommits + 1 {
		fmt.Fprintf(&stream, "commit refs/heads/main\ncommitter t <t@t> %d +0000\ndata 0\n\n", 1700000000+i)
	}
	fastImport(t, work, stream.String())
	first := runGitT(t, work, "rev-list", "--max-parents=0", "main")
	filterBare(t, root, work, "repo.git")
	srv, c := stockGitServer(t, root)
	f := &Fetcher{HTTP: c, Limits: Limits{MaxDownloadBytes: 16 << 20, MaxTreeBytes: 16 << 20, MaxEntries: 100, MaxSubmoduleDepth: 2}, TempDir: t.TempDir()}
	_, err := f.Fetch(context.Background(), Address{Kind: KindGit, URL: srv.URL + "/repo.git", Ref: first[:10]}, io.Discard)
	var le *LimitError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "more than the 20000 allowed") {
		t.Errorf("abbreviated id in a history of %d commits: %v, want a *LimitError saying it is too long", maxHistoryCommits+1, err)
	}
}
