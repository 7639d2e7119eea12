package releasesdoor_test

import (
	"bytes"
	"crypto/sha256"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/proxy"
	"github.com/tfmirror/tfmirror/v2/releases"
)

var strongETag = regexp.MustCompile(`^"[^"]+"$`)

// TestDocumentsAnswerIfNoneMatch: every document of the door (the version
// lists and documents the installers read, the HTML listings, the
// SHA256SUMS and its signatures) carries a strong ETag of the bytes sent,
// the same to HEAD as to GET, as every other door's documents do; a
// request whose If-None-Match names it is answered 304 without a body,
// with the document's Cache-Control: a cache in front revalidating the
// list (max-age=60) was sent it whole each time. Once a document changes
// (a version published), its old ETag gets 200, the new document and a
// new ETag.
func TestDocumentsAnswerIfNoneMatch(t *testing.T) {
	r := newRigConfig(t, nil, fakeorigin.ReleasesOptions{}, func(*fakeorigin.Releases) releases.Config {
		return releases.Config{ListTTL: time.Nanosecond} // every request asks the origin for the list
	})
	changing := []string{
		"/releases/hashicorp/terraform/index.json",
		"/releases/hashicorp/terraform/",
		"/releases/hashicorp/terraform",
		"/releases/opentofu/api.json",
		"/releases/opentofu/tofu/api.json",
		"/releases/opentofu/latest",
		"/releases/opentofu/",
	}
	fixed := []string{
		"/releases/hashicorp/",
		"/releases/hashicorp/terraform/1.6.0/index.json",
		"/releases/hashicorp/terraform/1.6.0/",
		"/releases/hashicorp/terraform/1.6.0/terraform_1.6.0_SHA256SUMS",
		"/releases/hashicorp/terraform/1.6.0/terraform_1.6.0_SHA256SUMS.sig",
		"/releases/opentofu/v1.8.0/",
		"/releases/opentofu/v1.8.0/tofu_1.8.0_SHA256SUMS",
		"/releases/opentofu/v1.8.0/tofu_1.8.0_SHA256SUMS.gpgsig",
	}
	etags := map[string]string{}
	bodies := map[string][]byte{}
	for _, path := range append(append([]string{}, changing...), fixed...) {
		status, body, h := r.get(t, path)
		etag := h.Get("ETag")
		if status != http.StatusOK || !strongETag.MatchString(etag) {
			t.Errorf("%s: %d, ETag %q; want 200 and a strong ETag", path, status, etag)
			continue
		}
		etags[path], bodies[path] = etag, body
		hs, hb, hh := r.do(t, http.MethodHead, path)
		if hs != status || len(hb) != 0 || hh.Get("ETag") != etag || hh.Get("Content-Length") != h.Get("Content-Length") ||
			hh.Get("Cache-Control") != h.Get("Cache-Control") {
			t.Errorf("%s: HEAD %d, ETag %q, Content-Length %q, Cache-Control %q; GET %d, %q, %q, %q",
				path, hs, hh.Get("ETag"), hh.Get("Content-Length"), hh.Get("Cache-Control"),
				status, etag, h.Get("Content-Length"), h.Get("Cache-Control"))
		}
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			ns, nb, nh := r.do(t, method, path, "If-None-Match", etag)
			if ns != http.StatusNotModified || len(nb) != 0 || nh.Get("ETag") != etag || nh.Get("Cache-Control") != h.Get("Cache-Control") {
				t.Errorf("%s: %s If-None-Match its ETag: %d, %d bytes, ETag %q, Cache-Control %q; want 304, no body, %q and %q",
					path, method, ns, len(nb), nh.Get("ETag"), nh.Get("Cache-Control"), etag, h.Get("Cache-Control"))
			}
		}
		if os, ob, _ := r.do(t, http.MethodGet, path, "If-None-Match", `"other"`); os != http.StatusOK || !bytes.Equal(ob, body) {
			t.Errorf("%s: If-None-Match another ETag: %d, %d bytes; want 200 and the document", path, os, len(ob))
		}
	}

	r.origin.Add("hashicorp", "terraform", "1.7.0", "linux_amd64")
	r.origin.Add("opentofu", "tofu", "1.9.0", "linux_amd64")
	for _, path := range changing {
		status, body, h := r.do(t, http.MethodGet, path, "If-None-Match", etags[path])
		if status != http.StatusOK || bytes.Equal(body, bodies[path]) || h.Get("ETag") == etags[path] || !strongETag.MatchString(h.Get("ETag")) {
			t.Errorf("%s after a version was published, If-None-Match its old ETag: %d, ETag %q (was %q), body changed %v; want 200, the new document and a new ETag",
				path, status, h.Get("ETag"), etags[path], !bytes.Equal(body, bodies[path]))
		}
	}
	for _, path := range fixed {
		if status, _, _ := r.do(t, http.MethodGet, path, "If-None-Match", etags[path]); status != http.StatusNotModified {
			t.Errorf("%s, unchanged, If-None-Match its ETag: %d, want 304", path, status)
		}
	}
}

// TestPrivateDocumentsRevalidated: with client tokens, a document's 304
// stays private to its client and unstored, with Vary: Authorization, as
// its 200 is (TestAuthenticatedAnswersPrivate).
func TestPrivateDocumentsRevalidated(t *testing.T) {
	tok := "s3cret-token-for-tests"
	auth, err := proxy.NewAuth(proxy.AuthConfig{TokenHashes: [][sha256.Size]byte{sha256.Sum256([]byte(tok))}, SigningKey: bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, auth)
	for _, path := range []string{"/releases/hashicorp/terraform/index.json", "/releases/opentofu/api.json", "/releases/hashicorp/terraform/1.6.0/terraform_1.6.0_SHA256SUMS"} {
		status, _, h := r.do(t, http.MethodGet, path, "Authorization", "Bearer "+tok)
		etag := h.Get("ETag")
		if status != http.StatusOK || etag == "" {
			t.Errorf("%s: %d, ETag %q; want 200 and an ETag", path, status, etag)
			continue
		}
		status, _, h = r.do(t, http.MethodGet, path, "Authorization", "Bearer "+tok, "If-None-Match", etag)
		cc, vary := h.Get("Cache-Control"), strings.Join(h.Values("Vary"), ", ")
		if status != http.StatusNotModified || cc != "private, no-store" || !strings.Contains(vary, "Authorization") {
			t.Errorf("%s revalidated: %d, Cache-Control %q, Vary %q; want 304, private, no-store, Vary: Authorization", path, status, cc, vary)
		}
	}
}
