package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// manyRanges is a Range header of about 60 KB (within the 64 KiB a
// listener takes) whose ranges alternate between the first bytes of two
// chunks of the cache: a part each, and each part a chunk read from the
// cache, for a few bytes of the client's.
func manyRanges(far int64) string {
	var b strings.Builder
	b.WriteString("bytes=")
	for i := 0; b.Len() < 60000; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "0-0,%d-%d", far, far)
	}
	return b.String()
}

// TestManyRangesAnsweredWhole: a request naming several ranges of a
// cached archive is answered with the whole archive, once (RFC 9110 lets a
// server ignore Range), never with a part per range: thousands of small
// ranges alternating between two chunks of the cache made http.ServeContent
// read a chunk (512 KiB to 1 MiB) from the cache for each byte asked, and
// seconds of CPU per request of 60 KB. A single range is still served as
// one. The OCI and CLI releases doors mounted on the server are reached
// through the same layer.
func TestManyRangesAnsweredWhole(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]string{}
	mounted := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen[name] = r.Header.Get("Range")
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		})
	}
	h := newHarness(t, harnessOptions{
		origin: fakeorigin.Options{ArchiveSize: 2 << 20},
		cfg:    Config{OCI: mirrorErrorsDoor{mounted("oci")}, Releases: mirrorErrorsDoor{mounted("releases")}},
	})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	sha := h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")
	want := h.origin.Archive(ns, typ, "1.0.0", "linux_amd64")
	path := archivePath("1.0.0", "linux_amd64")
	if r := h.get(path); r.status != http.StatusOK || !bytes.Equal(r.body, want) {
		t.Fatalf("cold download: status %d, %d bytes", r.status, len(r.body))
	}
	h.waitCommitted(sha)

	attack := manyRanges(1 << 20)
	start := time.Now()
	r := h.get(path, "Range", attack)
	took := time.Since(start)
	if r.status != http.StatusOK || !bytes.Equal(r.body, want) {
		t.Errorf("%d ranges: status %d, Content-Type %q, %d bytes in %v; want 200 and the archive whole",
			strings.Count(attack, ",")+1, r.status, r.header.Get("Content-Type"), len(r.body), took)
	}
	for _, two := range []string{"bytes=0-0,10-19", "bytes=0-9, 0-9"} {
		if r := h.get(path, "Range", two); r.status != http.StatusOK || !bytes.Equal(r.body, want) {
			t.Errorf("Range %q: status %d, %d bytes; want 200 and the archive whole", two, r.status, len(r.body))
		}
	}
	if r := h.get(path, "Range", "bytes=10-19"); r.status != http.StatusPartialContent || !bytes.Equal(r.body, want[10:20]) {
		t.Errorf("one range: status %d, body %q; want 206 and its bytes", r.status, r.body)
	}
	if r := h.get(path, "Range", "bytes=-10"); r.status != http.StatusPartialContent || !bytes.Equal(r.body, want[len(want)-10:]) {
		t.Errorf("one suffix range: status %d, body %q; want 206 and its bytes", r.status, r.body)
	}

	for door, p := range map[string]string{"oci": "/v2/x/blobs/sha256:" + sha, "releases": "/releases/hashicorp/terraform/1.0.0/x.zip"} {
		h.get(p, "Range", attack)
		mu.Lock()
		got := seen[door]
		mu.Unlock()
		if got != "" {
			t.Errorf("the %s door was handed a Range of %d bytes; want none", door, len(got))
		}
		h.get(p, "Range", "bytes=5-9")
		mu.Lock()
		got = seen[door]
		mu.Unlock()
		if got != "bytes=5-9" {
			t.Errorf("the %s door was handed Range %q; want the one range asked", door, got)
		}
	}
}

// servedPaths starts a harness whose origin has a provider and a module,
// caches an archive of the one and a package of the other, and returns
// the paths that answer with http.ServeContent: the cached archive, the
// module's packages and the documents.
func servedPaths(t *testing.T) (*harness, map[string]string) {
	t.Helper()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	h.origin.AddTarball("m.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc\n")}))
	h.origin.AddModule("acme", "vpc", "aws", "1.0.0", h.origin.TarballURL("m.tar.gz"))
	archive := archivePath("1.0.0", "linux_amd64")
	if r := h.get(archive); r.status != http.StatusOK {
		t.Fatalf("archive: %d", r.status)
	}
	h.waitCommitted(h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64"))
	zip, _ := download(t, h, "acme/vpc/aws", "1.0.0")
	return h, map[string]string{
		"archive":           archive,
		"index.json":        providerPath("index.json"),
		"VERSION.json":      providerPath("1.0.0.json"),
		"module zip":        zip,
		"module tar.gz":     modBase + "acme/vpc/aws/1.0.0/package.tar.gz",
		"registry versions": "/registry/" + originHost + "/v1/providers/" + ns + "/" + typ + "/versions",
		"SHA256SUMS":        "/registry/" + originHost + "/v1/providers/" + ns + "/" + typ + "/1.0.0/download/linux/amd64/SHA256SUMS",
	}
}

// checkErrorAnswer fails t unless r is an error of the mirror protocols
// with status: their JSON error body (to GET) with a message containing
// want, no-store, no validators.
func checkErrorAnswer(t *testing.T, what, method string, r response, status int, want string) bool {
	t.Helper()
	if r.status != status {
		t.Errorf("%s: status %d, want %d", what, r.status, status)
		return false
	}
	if ct, cc := r.header.Get("Content-Type"), r.header.Get("Cache-Control"); ct != "application/json" || cc != "no-store" {
		t.Errorf("%s: Content-Type %q, Cache-Control %q; want application/json and no-store", what, ct, cc)
	}
	if et, lm := r.header.Get("ETag"), r.header.Get("Last-Modified"); et != "" || lm != "" {
		t.Errorf("%s: ETag %q, Last-Modified %q; want neither on an error", what, et, lm)
	}
	if method == http.MethodHead {
		return true
	}
	var body errorBody
	if err := json.Unmarshal(r.body, &body); err != nil || len(body.Errors) != 1 || !strings.Contains(body.Errors[0], want) {
		t.Errorf("%s: body %q (%v); want the JSON error saying %q", what, r.body, err, want)
	}
	return true
}

// TestRangeNotSatisfiableAnsweredAsAnError: a Range that names no byte of
// what a path serves (bytes=SIZE-, a download resumed after the file was
// whole; or a malformed one, bytes=9-2) is answered 416 as every other
// error of the mirror protocols is: their JSON error body (net/http's
// own text/plain "invalid range: failed to overlap" was sent), no-store,
// no validators, with Content-Range: bytes */SIZE (RFC 9110), for a
// cached provider archive, a module's package (tar.gz and zip) and the
// documents alike, to GET and HEAD.
func TestRangeNotSatisfiableAnsweredAsAnError(t *testing.T) {
	t.Parallel()
	h, paths := servedPaths(t)
	for name, path := range paths {
		whole := h.get(path)
		if whole.status != http.StatusOK || len(whole.body) == 0 {
			t.Fatalf("%s: %d, %d bytes", name, whole.status, len(whole.body))
		}
		size := len(whole.body)
		for _, rng := range []string{fmt.Sprintf("bytes=%d-", size), "bytes=9-2"} {
			for _, method := range []string{http.MethodGet, http.MethodHead} {
				r := h.do(context.Background(), method, path, "Range", rng)
				what := fmt.Sprintf("%s, %s Range %s", name, method, rng)
				if !checkErrorAnswer(t, what, method, r, http.StatusRequestedRangeNotSatisfiable, fmt.Sprint(size)) {
					continue
				}
				if got, want := r.header.Get("Content-Range"), fmt.Sprintf("bytes */%d", size); got != want {
					t.Errorf("%s: Content-Range %q, want %q", what, got, want)
				}
			}
		}
	}
}

// TestPreconditionFailedAnsweredAsAnError: an If-Match that names no ETag
// of what a path serves, or an If-Unmodified-Since before a cached
// archive's time, is answered 412 as every other error of the mirror
// protocols is: their JSON error body saying which header failed
// (http.ServeContent's own 412 had no body and the archive's
// Content-Type, application/zip), no-store, no validators, for the
// archive, a module's packages and the documents alike, to GET and HEAD;
// an If-Match naming its ETag is answered with it.
func TestPreconditionFailedAnsweredAsAnError(t *testing.T) {
	t.Parallel()
	h, paths := servedPaths(t)
	for name, path := range paths {
		whole := h.get(path)
		if whole.status != http.StatusOK || len(whole.body) == 0 {
			t.Fatalf("%s: %d, %d bytes", name, whole.status, len(whole.body))
		}
		if r := h.get(path, "If-Match", whole.header.Get("ETag")); r.status != http.StatusOK || !bytes.Equal(r.body, whole.body) {
			t.Errorf("%s, If-Match its ETag %s: %d, %d bytes; want 200 and it", name, whole.header.Get("ETag"), r.status, len(r.body))
		}
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			r := h.do(context.Background(), method, path, "If-Match", `"0000"`)
			checkErrorAnswer(t, fmt.Sprintf("%s, %s If-Match another ETag", name, method), method, r, http.StatusPreconditionFailed, "If-Match")
		}
		if lm := whole.header.Get("Last-Modified"); lm != "" {
			before := time.Now().Add(-10 * 365 * 24 * time.Hour).UTC().Format(http.TimeFormat)
			r := h.get(path, "If-Unmodified-Since", before)
			checkErrorAnswer(t, fmt.Sprintf("%s (Last-Modified %s), If-Unmodified-Since %s", name, lm, before), http.MethodGet, r, http.StatusPreconditionFailed, "If-Unmodified-Since")
		}
	}
}
