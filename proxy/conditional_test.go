package proxy

import (
	"bytes"
	"context"
	"net/http"
	"testing"
)

// TestColdArchiveAnswersIfNoneMatch: a cache in front revalidating its
// copy of an archive that the mirror no longer holds (evicted by the size
// limit, a new replica, a cache emptied) asks with If-None-Match naming
// the archive's sha256, which the mirror knows before its bytes. It gets
// 304 and no body, as for a cached archive, where it was sent the whole
// archive while the mirror downloaded it again; the download goes on and
// is cached once. An If-None-Match naming another ETag gets the archive.
func TestColdArchiveAnswersIfNoneMatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		platform := map[string]string{http.MethodGet: "linux_amd64", http.MethodHead: "darwin_arm64"}[method]
		sha := h.origin.SHA256(ns, typ, "1.0.0", platform)
		path := archivePath("1.0.0", platform)
		r := h.do(context.Background(), method, path, "If-None-Match", `"other", "`+sha+`"`)
		if r.err != nil || r.status != http.StatusNotModified || len(r.body) != 0 || r.header.Get("ETag") != `"`+sha+`"` {
			t.Errorf("cold %s with If-None-Match naming it: %d (%v), ETag %q, %d bytes; want 304, its ETag, no body",
				method, r.status, r.err, r.header.Get("ETag"), len(r.body))
		}
		h.waitCommitted(sha)
		if n := h.origin.ArchiveHits(ns, typ, "1.0.0", platform); n != 1 {
			t.Errorf("%s: origin archive fetches = %d, want 1", platform, n)
		}
	}
	want := h.origin.Archive(ns, typ, "1.0.0", "windows_amd64")
	r := h.get(archivePath("1.0.0", "windows_amd64"), "If-None-Match", `"`+h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")+`"`)
	if r.status != http.StatusOK || !bytes.Equal(r.body, want) {
		t.Errorf("cold archive, If-None-Match naming another: %d, %d bytes; want 200 and the archive", r.status, len(r.body))
	}
}

// TestColdArchiveAnswersIfMatch: an If-Match that does not name a cold
// archive's ETag (its sha256, known before its bytes) is answered 412 in
// the door's error format, as for a cached archive, where the whole
// archive was sent; one naming it, or "*", gets the archive. A weak tag
// names nothing (If-Match compares strongly).
func TestColdArchiveAnswersIfMatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0", "1.1.0"}, platforms)
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		platform := map[string]string{http.MethodGet: "linux_amd64", http.MethodHead: "darwin_arm64"}[method]
		sha := h.origin.SHA256(ns, typ, "1.0.0", platform)
		r := h.do(context.Background(), method, archivePath("1.0.0", platform), "If-Match", `"0000", W/"`+sha+`"`)
		checkErrorAnswer(t, "cold "+method+" with If-Match naming another ETag", method, r, http.StatusPreconditionFailed, "If-Match")
	}
	for _, version := range []string{"1.0.0", "1.1.0"} {
		platform := "windows_amd64"
		want := h.origin.Archive(ns, typ, version, platform)
		im := "*"
		if version == "1.0.0" {
			im = `"0000", "` + h.origin.SHA256(ns, typ, version, platform) + `"`
		}
		r := h.get(archivePath(version, platform), "If-Match", im)
		if r.status != http.StatusOK || !bytes.Equal(r.body, want) {
			t.Errorf("cold archive, If-Match %s: %d, %d bytes; want 200 and the archive", im, r.status, len(r.body))
		}
	}
}
