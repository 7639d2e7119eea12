package proxy

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
)

// VERSION.json is rendered again when an archive's h1: hash appears
// (cached) or disappears (evicted).
func TestRenderedVersionFollowsArchiveCache(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	hashes := func() []string {
		t.Helper()
		r := h.get(providerPath("1.0.0.json"))
		if r.status != http.StatusOK {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		var doc versionDocument
		r.json(t, &doc)
		return doc.Archives["linux_amd64"].Hashes
	}
	for range 2 {
		if got := hashes(); len(got) != 1 {
			t.Fatalf("hashes before caching %v, want only zh:", got)
		}
	}
	sha := h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")
	if r := h.get(fmt.Sprintf("/%s/%s/%s/terraform-provider-%s_1.0.0_linux_amd64.zip", originHost, ns, typ, typ)); r.status != http.StatusOK {
		t.Fatalf("archive: status %d", r.status)
	}
	h.waitCommitted(sha)
	for range 2 {
		if got := hashes(); len(got) != 2 {
			t.Fatalf("hashes once cached %v, want h1: and zh:", got)
		}
	}
	if err := cachetest.DeleteBlob(h.store, sha); err != nil {
		t.Fatal(err)
	}
	if got := hashes(); len(got) != 1 {
		t.Errorf("hashes after eviction %v, want only zh:", got)
	}
}
