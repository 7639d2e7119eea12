package mirror

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// lookupMetrics counts cache hits by kind.
type lookupMetrics struct {
	noMetrics
	mu   sync.Mutex
	hits map[string]int
}

func (m *lookupMetrics) CacheLookup(kind string, hit bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if hit {
		m.hits[kind]++
	}
}

func (m *lookupMetrics) hitsOf(kind string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hits[kind]
}

func (h *harness) listState() ListState {
	h.t.Helper()
	_, st, err := h.engine.Versions(context.Background(), h.provider())
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

// A version list answered from the cache is reusable until its TTL runs
// out, and reusing it counts as the cache hit the call would have been;
// one fetched from the origin, or served stale, is not reusable.
func TestReuseVersionList(t *testing.T) {
	t.Parallel()
	clock := enginetest.NewFakeClock()
	met := &lookupMetrics{hits: map[string]int{}}
	h := newHarness(t, harnessOptions{cfg: Config{VersionsTTL: 10 * time.Minute, Now: clock.Now, Metrics: met}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)

	if st := h.listState(); !st.Fetched || h.engine.Reuse(st.Stamp) {
		t.Fatalf("a list just fetched: fetched %v, reusable %v; want fetched, not reusable", st.Fetched, h.engine.Reuse(st.Stamp))
	}
	st := h.listState()
	hits := met.hitsOf("versions")
	for range 3 {
		if !h.engine.Reuse(st.Stamp) {
			t.Fatal("a list from the cache is not reusable within its TTL")
		}
	}
	if got := met.hitsOf("versions") - hits; got != 3 {
		t.Errorf("3 reuses counted %d version-list cache hits, want 3", got)
	}
	clock.Set(st.StoredAt.Add(10 * time.Minute))
	if h.engine.Reuse(st.Stamp) {
		t.Error("a list is reusable once its TTL has run out")
	}
	if got := met.hitsOf("versions") - hits; got != 3 {
		t.Errorf("a refused reuse counted a cache hit (%d, want 3)", got)
	}

	// Past the TTL with the origin down: served stale, not reusable.
	h.origin.SetDown(http.StatusServiceUnavailable)
	st = h.listState()
	if !st.Stale || h.engine.Reuse(st.Stamp) {
		t.Fatalf("origin down after the TTL: stale %v, reusable %v; want stale, not reusable", st.Stale, h.engine.Reuse(st.Stamp))
	}
	var zero Stamp
	if h.engine.Reuse(zero) {
		t.Error("the zero Stamp is reusable")
	}
}

// Any metadata write, of any provider, ends reuse: the engine does not
// know which answers it changes.
func TestReuseEndsWithAWrite(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	h.origin.AddProvider(ns, "other", []string{"1.0.0"}, platforms)
	h.listState()
	st := h.listState()
	if !h.engine.Reuse(st.Stamp) {
		t.Fatal("a list from the cache is not reusable")
	}
	other := addrs.Provider{Hostname: originHost, Namespace: ns, Type: "other"}
	if _, _, err := h.engine.Versions(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	if h.engine.Reuse(st.Stamp) {
		t.Error("a list is reusable after another provider's list was written")
	}
	if st := h.listState(); !h.engine.Reuse(st.Stamp) {
		t.Error("the list read again after the write is not reusable")
	}
}

// Package metadata is reusable until an archive is cached (its h1: hash
// joins the answer) or evicted, and reuse counts both cache hits.
func TestReusePackageFollowsArchiveCache(t *testing.T) {
	t.Parallel()
	met := &lookupMetrics{hits: map[string]int{}}
	h := newHarness(t, harnessOptions{cfg: Config{Metrics: met}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	pkg, err := h.packages("1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if h.engine.Reuse(pkg.Stamp) {
		t.Fatal("package metadata just fetched is reusable")
	}
	if pkg, err = h.packages("1.0.0"); err != nil {
		t.Fatal(err)
	}
	vh, ph := met.hitsOf("versions"), met.hitsOf("package")
	if !h.engine.Reuse(pkg.Stamp) {
		t.Fatal("package metadata from the cache is not reusable")
	}
	if met.hitsOf("versions") != vh+1 || met.hitsOf("package") != ph+1 {
		t.Errorf("a reuse counted %d version-list and %d package hits, want 1 and 1",
			met.hitsOf("versions")-vh, met.hitsOf("package")-ph)
	}

	if r := h.read(context.Background(), "1.0.0", "linux_amd64"); r.err != nil {
		t.Fatal(r.err)
	}
	sha := h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")
	h.waitCommitted(sha)
	if h.engine.Reuse(pkg.Stamp) {
		t.Fatal("package metadata is reusable after one of its archives was cached")
	}
	pkg, err = h.packages("1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if !h.engine.Reuse(pkg.Stamp) {
		t.Fatal("package metadata read again after the archive was cached is not reusable")
	}
	if err := cachetest.DeleteBlob(h.store, sha); err != nil {
		t.Fatal(err)
	}
	if h.engine.Reuse(pkg.Stamp) {
		t.Error("package metadata is reusable after one of its archives was evicted")
	}
}

// Package metadata with platforms the origin had no package for is
// reusable only until those findings are to be checked again, even when
// its version list stays fresh for longer.
func TestReusePackageWithMissingPlatforms(t *testing.T) {
	t.Parallel()
	clock := enginetest.NewFakeClock()
	// The cache stamps lists with the real time; an engine clock an hour
	// behind keeps the list fresh long after the finding is due.
	clock.Add(-time.Hour)
	h := newHarness(t, harnessOptions{cfg: Config{VersionsTTL: 10 * time.Minute, Now: clock.Now}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	h.origin.SetKindStatus(fakeorigin.Download, http.StatusNotFound)
	if _, err := h.packages("1.0.0"); err != nil {
		t.Fatal(err)
	}
	found := clock.Now()
	pkg, err := h.packages("1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkg.Archives) != 0 {
		t.Fatalf("%d archives, want none", len(pkg.Archives))
	}
	if !h.engine.Reuse(pkg.Stamp) {
		t.Fatal("package metadata with believed-missing platforms is not reusable")
	}
	clock.Set(found.Add(10 * time.Minute))
	if !h.engine.Reuse(h.listState().Stamp) {
		t.Fatal("the version list is not fresh any more: the test proves nothing")
	}
	if h.engine.Reuse(pkg.Stamp) {
		t.Error("package metadata is reusable after its missing platforms are due to be asked for again")
	}
	hits := h.origin.Hits(fakeorigin.Download)
	if _, err := h.packages("1.0.0"); err != nil {
		t.Fatal(err)
	}
	if h.origin.Hits(fakeorigin.Download) == hits {
		t.Error("the engine did not ask again either: the test proves nothing")
	}
}
