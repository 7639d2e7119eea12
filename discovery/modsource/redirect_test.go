package modsource

import (
	"context"
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
		srv := httptest.NewTLSServer(mux)
		f := &Fetcher{HTTP: srv.Client(), Limits: defaultLimits, TempDir: t.TempDir()}
		a, err := Parse("git::" + srv.URL + "/repo.git?ref=v1")
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Fetch(context.Background(), a, io.Discard)
		srv.Close()
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
