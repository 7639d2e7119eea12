package modsource

import (
	"bytes"
	"context"
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
func stockGitServer(t *testing.T, root string) (*httptest.Server, *http.Client) {
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

func runGitT(t *testing.T, dir string, args ...string) string {
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

// A ref that is the full id of a commit, in either case, is that commit,
// as go-getter's `git checkout ID` takes it: one that no branch or tag
// names too (the commit a registry pinned, after its branch moved on),
// from a Git server as Git ships it (smart HTTP lets a client want any
// commit a ref reaches).
func TestFetchGitCommitIDEitherCase(t *testing.T) {
	needGit(t)
	root := t.TempDir()
	work := filepath.Join(root, "work")
	os.Mkdir(work, 0o755)
	runGitT(t, work, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(work, "main.tf"), []byte("# one\n"), 0o644)
	runGitT(t, work, "add", ".")
	runGitT(t, work, "commit", "-q", "-m", "one")
	first := runGitT(t, work, "rev-parse", "HEAD")
	os.WriteFile(filepath.Join(work, "main.tf"), []byte("# two\n"), 0o644)
	runGitT(t, work, "commit", "-q", "-am", "two")
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
