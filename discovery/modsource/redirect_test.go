package modsource

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestGitErrorHidesRedirectTarget: a Git source that redirects to a
// pre-signed URL, which then fails, gives an error (logged, and shown to
// the client that asked) without that URL's query string, which neither
// the location nor anything the caller holds names.
func TestGitErrorHidesRedirectTarget(t *testing.T) {
	const secret = "redirectsignature0123456789"
	for _, status := range []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusTeapot} {
		mux := http.NewServeMux()
		mux.HandleFunc("/repo.git/info/refs", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/signed/info/refs?service=git-upload-pack&X-Amz-Signature="+secret, http.StatusFound)
		})
		mux.HandleFunc("/signed/info/refs", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) })
		err := fetchGitFrom(t, mux)
		if err == nil {
			t.Fatalf("status %d: no error", status)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("status %d: the error carries the redirect's signed query: %v", status, err)
		}
		if !strings.Contains(err.Error(), "/repo.git") {
			t.Errorf("status %d: the error does not name the repository: %v", status, err)
		}
	}
}

// TestSubmoduleURLsStayOnHTTPS: a .gitmodules URL that names the mirror's
// own disk or another protocol is refused; a relative one stays on the
// parent repository's https host, however far it climbs.
func TestSubmoduleURLsStayOnHTTPS(t *testing.T) {
	const parent = "https://h.test/org/repo.git"
	for _, raw := range []string{
		"file:///etc", "file://localhost/srv/repo.git", "/srv/repo.git", "ssh://git@h.test/org/sub.git",
		"git@h.test:org/sub.git", "http://h.test/org/sub.git", "git://h.test/org/sub.git", "ext::sh -c touch% /tmp/x",
	} {
		if got, err := resolveSubmoduleURL(parent, raw); err == nil {
			t.Errorf("submodule URL %q resolved to %q, want a refusal", raw, got)
		}
	}
	for raw, want := range map[string]string{
		"../sub.git":             "https://h.test/org/sub.git",
		"../../../../../etc/sub": "https://h.test/etc/sub",
		"./sub.git":              "https://h.test/org/repo.git/sub.git",
	} {
		if got, err := resolveSubmoduleURL(parent, raw); err != nil || got != want {
			t.Errorf("submodule URL %q = %q, %v; want %q", raw, got, err, want)
		}
	}
}

// TestGitRefusalBodyNotInError: a source host's answer of 401, 403 or
// 404, whose page go-git puts whole in its error, is not in the fetch's
// error, which the log and the client's answer show: such a page may
// echo the request, the credential it carried included.
func TestGitRefusalBodyNotInError(t *testing.T) {
	const secret = "echoedcredential0123456789"
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound} {
		err := fetchGitFrom(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			io.WriteString(w, "request refused: Authorization: Bearer "+secret)
		}))
		if err == nil {
			t.Fatalf("status %d: no error", status)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("status %d: the error carries the source host's page: %v", status, err)
		}
		if !strings.Contains(err.Error(), "/repo.git") || !errors.Is(err, ErrSource) {
			t.Errorf("status %d: the error does not name the repository or is no source refusal: %v", status, err)
		}
	}
}

// fetchGitFrom fetches the Git module source repo.git at v1 from a
// server on loopback that h answers, and returns the fetch's error.
func fetchGitFrom(t *testing.T, h http.Handler) error {
	t.Helper()
	srv := httptest.NewTLSServer(h)
	defer srv.Close()
	f := &Fetcher{HTTP: srv.Client(), Limits: defaultLimits, TempDir: t.TempDir()}
	a, err := Parse("git::" + srv.URL + "/repo.git?ref=v1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Fetch(context.Background(), a, io.Discard)
	return err
}
