package proxy

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/internal/fakeorigin"
)

// Version lists are kept decoded in memory; a refresh after the TTL must
// still replace them, and within the TTL the origin is not asked again.
func TestRememberedVersionListIsRefreshed(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	h := newHarness(t, harnessOptions{cfg: Config{
		VersionsTTL: 10 * time.Minute,
		Now:         func() time.Time { return time.Unix(0, now.Load()) },
	}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	listed := func() []string {
		t.Helper()
		r := h.get(providerPath("index.json"))
		if r.status != http.StatusOK {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		var doc indexDocument
		r.json(t, &doc)
		var vs []string
		for v := range doc.Versions {
			vs = append(vs, v)
		}
		slices.Sort(vs)
		return vs
	}
	for range 3 {
		if got := listed(); !slices.Equal(got, []string{"1.0.0"}) {
			t.Fatalf("versions %v, want [1.0.0]", got)
		}
	}
	h.origin.AddProvider(ns, typ, []string{"2.0.0"}, platforms)
	if got := listed(); !slices.Equal(got, []string{"1.0.0"}) {
		t.Errorf("within the TTL: versions %v, want the cached [1.0.0]", got)
	}
	if n := h.origin.Hits(fakeorigin.Versions); n != 1 {
		t.Errorf("origin versions hits within the TTL = %d, want 1", n)
	}
	now.Add(int64(11 * time.Minute))
	if got := listed(); !slices.Equal(got, []string{"1.0.0", "2.0.0"}) {
		t.Fatalf("after the TTL: versions %v, want [1.0.0 2.0.0]", got)
	}
	// The cache stamps documents with the real time: back to it, the
	// refreshed list is fresh and must be what is remembered.
	now.Store(time.Now().UnixNano())
	hits := h.origin.Hits(fakeorigin.Versions)
	for range 3 {
		if got := listed(); !slices.Equal(got, []string{"1.0.0", "2.0.0"}) {
			t.Fatalf("after the refresh: versions %v, want [1.0.0 2.0.0]", got)
		}
	}
	if n := h.origin.Hits(fakeorigin.Versions); n != hits {
		t.Errorf("origin versions hits after the refresh grew by %d, want 0", n-hits)
	}
}

// A package record read from memory is shared by concurrent requests, so
// adding platforms to it must work on a copy (the race detector checks),
// and the grown record must be what later requests see.
func TestRememberedPackageRecordGrows(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	archive := func(pl string) string {
		return fmt.Sprintf("/%s/%s/%s/terraform-provider-%s_1.0.0_%s.zip", originHost, ns, typ, typ, pl)
	}
	// A record with one platform, then read (and remembered) again.
	for range 2 {
		if r := h.do(t.Context(), http.MethodHead, archive(platforms[0])); r.status != http.StatusOK {
			t.Fatalf("HEAD archive: status %d: %s", r.status, r.body)
		}
	}
	var wg sync.WaitGroup
	docs := make([]versionDocument, 4)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				r := h.get(providerPath("1.0.0.json"))
				if r.status != http.StatusOK {
					t.Errorf("VERSION.json: status %d: %s", r.status, r.body)
					return
				}
				r.json(t, &docs[i/2])
				return
			}
			if r := h.do(t.Context(), http.MethodHead, archive(platforms[0])); r.status != http.StatusOK {
				t.Errorf("HEAD archive: status %d", r.status)
			}
		}()
	}
	wg.Wait()
	h.waitIdle()
	for i, doc := range docs {
		if len(doc.Archives) != len(platforms) {
			t.Errorf("VERSION.json %d lists %d platforms, want %d", i, len(doc.Archives), len(platforms))
		}
	}
	// Every platform is now known without asking the origin again.
	hits := h.origin.Hits(fakeorigin.Download)
	for _, pl := range platforms {
		if r := h.do(t.Context(), http.MethodHead, archive(pl)); r.status != http.StatusOK {
			t.Errorf("HEAD %s archive: status %d", pl, r.status)
		}
	}
	h.waitIdle()
	if n := h.origin.Hits(fakeorigin.Download); n != hits {
		t.Errorf("package metadata fetched %d more times, want 0", n-hits)
	}
}

// VERSION.json is rendered again when an archive's h1: hash appears
// (cached) or disappears (evicted).
func TestRenderedVersionFollowsArchiveCache(t *testing.T) {
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
	if err := h.store.DeleteBlob(sha); err != nil {
		t.Fatal(err)
	}
	if got := hashes(); len(got) != 1 {
		t.Errorf("hashes after eviction %v, want only zh:", got)
	}
}
