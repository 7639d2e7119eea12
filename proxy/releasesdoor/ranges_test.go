package releasesdoor_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/mirror"
)

// do sends one request to the door with the header pairs given.
func (r *rig) do(t *testing.T, method, path string, header ...string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, r.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body, resp.Header
}

// TestRangeNotSatisfiableAnsweredAsAnError: a Range that names no byte of
// a cached archive or a document (bytes=SIZE-, a download resumed after
// the file was whole; or a malformed bytes=9-2) is answered 416 as every
// other error of the door is, its message in text/plain naming the size
// (net/http's own "invalid range: failed to overlap" was sent),
// no-store, without validators, and with Content-Range: bytes */SIZE
// (RFC 9110), to GET and HEAD; a range within it, 206. An If-Match that
// fails is answered 412 in the same way.
func TestRangeNotSatisfiableAnsweredAsAnError(t *testing.T) {
	r := newRig(t, nil)
	paths := map[string]string{
		"archive":          "/releases/hashicorp/terraform/1.6.0/terraform_1.6.0_linux_amd64.zip",
		"OpenTofu archive": "/releases/opentofu/v1.8.0/tofu_1.8.0_linux_amd64.zip",
	}
	for _, path := range paths {
		r.get(t, path)
	}
	enginetest.WaitIdle(t, func(ctx context.Context) error { return mirror.WaitIdle(ctx, r.side.Engine) })
	// The documents, served with Range since they carry an ETag.
	paths["version document"] = "/releases/hashicorp/terraform/1.6.0/index.json"
	paths["SHA256SUMS"] = "/releases/opentofu/v1.8.0/tofu_1.8.0_SHA256SUMS"
	paths["version list"] = "/releases/opentofu/api.json"
	for name, path := range paths {
		status, whole, hdr := r.get(t, path)
		if status != http.StatusOK || len(whole) == 0 || strings.HasSuffix(path, ".zip") && hdr.Get("X-Tfmirror-Cache") != "hit" {
			t.Fatalf("%s: %d, %d bytes, X-Tfmirror-Cache %q; want it whole, an archive cached", name, status, len(whole), hdr.Get("X-Tfmirror-Cache"))
		}
		if status, part, _ := r.do(t, http.MethodGet, path, "Range", "bytes=1-3"); status != http.StatusPartialContent || string(part) != string(whole[1:4]) {
			t.Errorf("%s, Range bytes=1-3: %d %q; want 206 and its bytes", name, status, part)
		}
		size := len(whole)
		for _, rng := range []string{fmt.Sprintf("bytes=%d-", size), "bytes=9-2"} {
			for _, method := range []string{http.MethodGet, http.MethodHead} {
				status, body, h := r.do(t, method, path, "Range", rng)
				what := fmt.Sprintf("%s, %s Range %s", name, method, rng)
				if status != http.StatusRequestedRangeNotSatisfiable {
					t.Errorf("%s: status %d, want 416", what, status)
					continue
				}
				if got, want := h.Get("Content-Range"), fmt.Sprintf("bytes */%d", size); got != want {
					t.Errorf("%s: Content-Range %q, want %q", what, got, want)
				}
				if ct, cc := h.Get("Content-Type"), h.Get("Cache-Control"); ct != "text/plain; charset=utf-8" || cc != "no-store" {
					t.Errorf("%s: Content-Type %q, Cache-Control %q; want the door's text/plain and no-store", what, ct, cc)
				}
				if et, lm := h.Get("ETag"), h.Get("Last-Modified"); et != "" || lm != "" {
					t.Errorf("%s: ETag %q, Last-Modified %q; want neither on an error", what, et, lm)
				}
				if method == http.MethodGet && (!strings.Contains(string(body), fmt.Sprint(size)) || strings.Contains(string(body), "failed to overlap")) {
					t.Errorf("%s: body %q; want the door's message naming the size", what, body)
				}
			}
		}
		// An If-Match that fails is 412 in the door's text, as its
		// other errors (http.ServeContent's own had no body, and an
		// archive's Content-Type).
		status, body, h := r.do(t, http.MethodGet, path, "If-Match", `"0000"`)
		if status != http.StatusPreconditionFailed || !strings.Contains(string(body), "If-Match") ||
			h.Get("Content-Type") != "text/plain; charset=utf-8" || h.Get("Cache-Control") != "no-store" || h.Get("ETag") != "" {
			t.Errorf("%s, If-Match another ETag: %d %q, Content-Type %q, Cache-Control %q, ETag %q; want 412, the door's text naming If-Match, no-store, no ETag",
				name, status, body, h.Get("Content-Type"), h.Get("Cache-Control"), h.Get("ETag"))
		}
	}
}
