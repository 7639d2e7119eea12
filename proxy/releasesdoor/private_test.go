package releasesdoor_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/proxy"
)

// TestAuthenticatedAnswersPrivate: with client tokens, every answer of
// the door (documents, listings, signed files, archives cold and cached,
// a 304) is marked private to its client and not to be stored, as the
// other doors' are: a shared cache in front that keeps answers whatever
// the request's Authorization (nginx's proxy_cache does) kept a token
// holder's answer, max-age=60, and handed it to clients without one.
func TestAuthenticatedAnswersPrivate(t *testing.T) {
	tok := "s3cret-token-for-tests"
	auth, err := proxy.NewAuth(proxy.AuthConfig{TokenHashes: [][sha256.Size]byte{sha256.Sum256([]byte(tok))}, SigningKey: bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, auth)
	archive := "/releases/hashicorp/terraform/1.6.0/terraform_1.6.0_linux_amd64.zip"
	paths := []string{
		archive, // cold
		"/releases/hashicorp/terraform/index.json",
		"/releases/hashicorp/terraform/1.6.0/index.json",
		"/releases/hashicorp/terraform/",
		"/releases/hashicorp/terraform/1.6.0/terraform_1.6.0_SHA256SUMS",
		"/releases/opentofu/api.json",
		"/releases/opentofu/latest",
	}
	do := func(path string, set func(*http.Request), header ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", r.srv.URL+path, nil)
		set(req)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	private := func(name string, resp *http.Response, want int) {
		t.Helper()
		cc := resp.Header.Get("Cache-Control")
		if resp.StatusCode != want || !strings.Contains(cc, "private") || !strings.Contains(cc, "no-store") {
			t.Errorf("%s: %d, Cache-Control %q, Vary %q; want %d, private and no-store", name, resp.StatusCode, cc, resp.Header.Values("Vary"), want)
		}
	}
	for name, set := range map[string]func(*http.Request){
		"bearer": func(q *http.Request) { q.Header.Set("Authorization", "Bearer "+tok) },
		"basic":  func(q *http.Request) { q.SetBasicAuth("anyone", tok) },
	} {
		for _, path := range paths {
			private(name+" "+path, do(path, set), http.StatusOK)
		}
		enginetest.WaitIdle(t, func(ctx context.Context) error { return mirror.WaitIdle(ctx, r.side.Engine) })
		cached := do(archive, set)
		private(name+" cached archive", cached, http.StatusOK)
		private(name+" cached archive revalidated", do(archive, set, "If-None-Match", cached.Header.Get("ETag")), http.StatusNotModified)
	}
}
