package proxy

import (
	"bytes"
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
		cfg:    Config{OCI: mounted("oci"), Releases: mounted("releases")},
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
