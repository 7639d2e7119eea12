package proxy

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/mirror"
)

var strongETag = regexp.MustCompile(`^"[0-9a-f]{64}"$`)

// TestCacheHeaders checks what an HTTP cache or CDN in front of the mirror
// is told about each kind of answer, and that it can revalidate.
func TestCacheHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		ttl       time.Duration
		path      string
		wantCC    string
		wantCache bool // a strong ETag is sent and If-None-Match gives 304
	}{
		{"index.json", 0, providerPath("index.json"), "public, max-age=60", true},
		{"index.json with a short versions TTL", 20 * time.Second, providerPath("index.json"), "public, max-age=20", true},
		{"VERSION.json", 0, providerPath("1.0.0.json"), "public, max-age=60", true},
		{"archive", 0, archivePath("1.0.0", "linux_amd64"), "public, max-age=60", true},
		{"archive with a short versions TTL", 20 * time.Second, archivePath("1.0.0", "linux_amd64"), "public, max-age=20", true},
		{"unknown version", 0, providerPath("9.9.9.json"), "no-store", false},
		{"host not allowed", 0, "/example.com/" + ns + "/" + typ + "/index.json", "no-store", false},
		{"not a mirror path", 0, "/a/b", "no-store", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{engine: mirror.Config{VersionsTTL: tc.ttl}})
			h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
			r := h.get(tc.path)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if got := r.header.Get("Cache-Control"); got != tc.wantCC {
				t.Errorf("status %d Cache-Control %q, want %q", r.status, got, tc.wantCC)
			}
			etag := r.header.Get("ETag")
			if !tc.wantCache {
				if r.status < 400 || etag != "" {
					t.Errorf("status %d ETag %q, want an error without ETag", r.status, etag)
				}
				return
			}
			h.waitIdle()
			if r.status != http.StatusOK || !strongETag.MatchString(etag) {
				t.Fatalf("status %d ETag %q, want 200 with a strong hash ETag", r.status, etag)
			}
			again := h.get(tc.path, "If-None-Match", etag)
			if again.status != http.StatusNotModified || len(again.body) != 0 {
				t.Errorf("If-None-Match %s: status %d with %d body bytes, want 304 and none", etag, again.status, len(again.body))
			}
			if got := again.header.Get("ETag"); got != etag {
				t.Errorf("304 ETag %q, want %q", got, etag)
			}
			other := h.get(tc.path, "If-None-Match", `"0000"`)
			if other.status != http.StatusOK || len(other.body) != len(r.body) {
				t.Errorf("other ETag: status %d with %d bytes, want 200 with %d", other.status, len(other.body), len(r.body))
			}
			// A precondition that fails is an error like any other: not
			// to be kept by a cache, nor validated as the file it is not.
			failed := h.get(tc.path, "If-Match", `"0000"`)
			if failed.status != http.StatusPreconditionFailed {
				t.Fatalf("If-Match of another ETag: status %d, want 412", failed.status)
			}
			if cc, et := failed.header.Get("Cache-Control"), failed.header.Get("ETag"); cc != "no-store" || et != "" {
				t.Errorf("412 Cache-Control %q ETag %q, want no-store and no ETag", cc, et)
			}
		})
	}
}

// TestVersionETagChangesWithHashes: VERSION.json gains h1: hashes as its
// archives get cached, so a cache revalidating an older copy must get the
// new document, not 304.
func TestVersionETagChangesWithHashes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	before := h.get(providerPath("1.0.0.json"))
	if before.status != http.StatusOK {
		t.Fatalf("status %d: %s", before.status, before.body)
	}
	if r := h.get(archivePath("1.0.0", "linux_amd64")); r.status != http.StatusOK || r.err != nil {
		t.Fatalf("archive: status %d err %v", r.status, r.err)
	}
	h.waitCommitted(h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64"))

	after := h.get(providerPath("1.0.0.json"), "If-None-Match", before.header.Get("ETag"))
	if after.status != http.StatusOK {
		t.Fatalf("revalidating the pre-cache document: status %d, want 200 with the new hashes", after.status)
	}
	if after.header.Get("ETag") == before.header.Get("ETag") || string(after.body) == string(before.body) {
		t.Errorf("document and ETag did not change after the archive was cached: %s", after.body)
	}
}

// TestStaleAnswersMustBeRevalidated: a version list served because the
// origin is down may be kept by a shared cache but not reused unchecked.
func TestStaleAnswersMustBeRevalidated(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{engine: mirror.Config{VersionsTTL: 1}}) // every request refreshes
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	fresh := h.get(providerPath("index.json"))
	if fresh.status != http.StatusOK {
		t.Fatalf("warm-up: %d", fresh.status)
	}
	h.origin.SetDown(http.StatusServiceUnavailable)
	stale := h.get(providerPath("index.json"))
	if stale.status != http.StatusOK || stale.header.Get("X-Tfmirror-Stale") == "" {
		t.Fatalf("origin down: status %d, stale header %q", stale.status, stale.header.Get("X-Tfmirror-Stale"))
	}
	if got := stale.header.Get("Cache-Control"); got != "no-cache" {
		t.Errorf("stale Cache-Control %q, want no-cache", got)
	}
	if stale.header.Get("ETag") != fresh.header.Get("ETag") {
		t.Errorf("same list, different ETags: %q and %q", fresh.header.Get("ETag"), stale.header.Get("ETag"))
	}
}

// TestUncacheableAnswers: health answers and the status JSON describe this
// moment and this replica; no cache may keep them.
func TestUncacheableAnswers(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	Healthz(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if got := rec.Header().Get("Cache-Control"); got != "no-store" {
		t.Errorf("/healthz Cache-Control %q, want no-store", got)
	}
	h := newHarness(t, harnessOptions{})
	r := h.get("/?format=json")
	if r.status != http.StatusOK || r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("/?format=json: status %d Cache-Control %q, want 200 no-store", r.status, r.header.Get("Cache-Control"))
	}
	if got := h.get("/").header.Get("Cache-Control"); got != "no-cache" {
		t.Errorf("status page Cache-Control %q, want no-cache", got)
	}
}

// TestPackageCacheControl: the other doors' package content is reusable
// for as long as the network mirror's documents and archives.
func TestPackageCacheControl(t *testing.T) {
	if want := documentCacheControl(time.Hour); "public, "+PackageCacheControl != want {
		t.Errorf("PackageCacheControl %q, want %q without public", PackageCacheControl, want)
	}
}
