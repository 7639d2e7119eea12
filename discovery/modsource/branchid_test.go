package modsource

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// A ref that names a branch other than the default one and is an
// abbreviated commit id too is the commit, as `git checkout` takes it
// after go-getter's clone, whose only local branch is the default one:
// Git finds a commit id before it makes a local branch of a remote one.
// A tag, and the default branch, so named are found first, as Git finds
// them (refs/tags/, refs/heads/), and a branch whose name is no commit's
// id is the branch. Before, such a branch was fetched where a direct
// install checks out the commit.
func TestFetchGitAbbreviatedIDBeforeOtherBranch(t *testing.T) {
	root, work := newWorkRepo(t)
	first := commitMainTF(t, work, "# one\n")
	shadow, tagged := first[:7], first[:9]
	runGitT(t, work, "checkout", "-q", "-b", shadow)
	commitMainTF(t, work, "# branch\n")
	runGitT(t, work, "checkout", "-q", "-b", tagged)
	branchTip := commitMainTF(t, work, "# tagged branch\n")
	runGitT(t, work, "tag", tagged, branchTip)
	runGitT(t, work, "checkout", "-q", "main")
	mainTip := commitMainTF(t, work, "# two\n")
	// A branch named as no commit's id begins.
	ids := runGitT(t, work, "rev-list", "--all")
	missing := ""
	for _, d := range "0123456789abcdef" {
		if !strings.Contains("\n"+ids, "\n"+string(d)) {
			missing = strings.Repeat(string(d), 6)
			break
		}
	}
	runGitT(t, work, "branch", missing, mainTip)
	runGitT(t, work, "commit", "-q", "--allow-empty", "-m", "three")
	filterBare(t, root, work, "repo.git")

	srv, c := stockGitServer(t, root)
	f := &Fetcher{HTTP: c, Limits: defaultLimits, TempDir: t.TempDir()}
	for _, tc := range []struct{ ref, commit string }{
		{shadow, first},
		{strings.ToUpper(shadow), first},
		{tagged, branchTip},
		{missing, mainTip},
	} {
		var buf bytes.Buffer
		res, err := f.Fetch(context.Background(), Address{Kind: KindGit, URL: srv.URL + "/repo.git", Ref: tc.ref}, &buf)
		if err != nil {
			t.Errorf("ref %s: %v", tc.ref, err)
			continue
		}
		if res.Commit != tc.commit {
			t.Errorf("ref %s: commit %s (main.tf %q), want %s", tc.ref, res.Commit, readTarGz(t, buf.Bytes())["main.tf"], tc.commit)
		}
	}
}

// A location with a depth (?depth=1) has go-getter clone its ref with
// `git clone --branch`, which takes a branch before a tag so named, and
// a branch named as a commit id may begin as the branch; without one, it
// checks the ref out, which takes the tag, and the commit. Before, the
// depth was dropped and the tag or the commit fetched where a direct
// install with a depth takes the branch.
func TestFetchGitDepthTakesBranchFirst(t *testing.T) {
	root, work := newWorkRepo(t)
	first := commitMainTF(t, work, "# one\n")
	shadow := first[:7]
	runGitT(t, work, "tag", "dup")
	runGitT(t, work, "checkout", "-q", "-b", "dup")
	dupTip := commitMainTF(t, work, "# dup branch\n")
	runGitT(t, work, "checkout", "-q", "-b", shadow)
	shadowTip := commitMainTF(t, work, "# shadow branch\n")
	runGitT(t, work, "checkout", "-q", "main")
	commitMainTF(t, work, "# two\n")
	filterBare(t, root, work, "repo.git")

	srv, c := stockGitServer(t, root)
	f := &Fetcher{HTTP: c, Limits: defaultLimits, TempDir: t.TempDir()}
	for _, tc := range []struct{ query, commit string }{
		{"?ref=dup&depth=1", dupTip},
		{"?ref=" + shadow + "&depth=1", shadowTip},
		{"?ref=dup", first},
		{"?ref=dup&depth=0", first},
		{"?ref=" + shadow, first},
	} {
		a, err := Parse("git::" + srv.URL + "/repo.git" + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		res, err := f.Fetch(context.Background(), a, io.Discard)
		if err != nil {
			t.Errorf("%s: %v", tc.query, err)
			continue
		}
		if res.Commit != tc.commit {
			t.Errorf("%s: commit %s, want %s", tc.query, res.Commit, tc.commit)
		}
	}
}
