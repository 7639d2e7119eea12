package retention

// A withheld import set aside in the record of the origin's version of
// its number (records.PackageRecord.Withheld): never evicted by the size
// limit nor removed by the rules, removed by a prune naming the version.

import (
	"reflect"
	"slices"
	"testing"

	"github.com/tfmirror/tfmirror/v2/mirror/records"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/mirror"
)

// setAside imports version 1.0.0 of the test provider without signature
// (an in-house package of about size bytes for linux_amd64, as an earlier
// release allowed under the allowed origin host), then starts the engine
// with strict (which must name the same cacheDir), under which the import
// is withheld, and reads the origin's 1.0.0: the import is set aside in
// the origin's record. The origin publishes versions. It returns the
// harness and the import's sha256.
func setAside(t *testing.T, strict harnessOptions, size int, versions ...string) (*harness, string) {
	t.Helper()
	allowed := harnessOptions{cacheDir: strict.cacheDir, origin: strict.origin, cfg: mirror.Config{UnsignedHosts: []string{originHost}}}
	h := newHarness(t, allowed)
	h.origin.AddProvider(ns, typ, versions, []string{"linux_amd64"})
	in, importSHA := unsignedImport(t, h.provider(), "1.0.0", size, 42)
	if _, err := h.engine.AirGap().Import(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	h.stop()
	h.start(strict)
	h.readAll("1.0.0")
	h.waitIdle()
	if got := setAsideSHA(t, h); got != importSHA {
		t.Fatalf("the import set aside in 1.0.0's record has sha256 %q, want %s (set-up broken)", got, importSHA)
	}
	return h, importSHA
}

// setAsideSHA is the sha256 of the linux_amd64 archive of the import set
// aside in the cached record of 1.0.0; "" when there is none.
func setAsideSHA(t *testing.T, h *harness) string {
	t.Helper()
	var rec records.PackageRecord
	if _, err := h.store.GetMeta(packageKey(h.provider(), "1.0.0"), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Provenance != records.ProvenanceOrigin {
		t.Fatalf("1.0.0's record is %q, want the origin's", rec.Provenance)
	}
	if rec.Withheld == nil {
		return ""
	}
	return rec.Withheld.Archives["linux_amd64"].SHA256
}

// Under a size limit below what the cache holds, the import set aside is
// never evicted while the origin's archives (which can be fetched again)
// are; the rules that remove the origin's versions leave it too.
func TestRetentionKeepsSetAsideImport(t *testing.T) {
	t.Parallel()
	const size = 32 << 10
	strict := harnessOptions{cacheDir: t.TempDir()}
	strict.origin.ArchiveSize = size
	h, importSHA := setAside(t, strict, size, "1.0.0", "2.0.0", "3.0.0")
	h.readAll("2.0.0", "3.0.0")
	h.stop()
	// Restarted under a limit below what the cache holds, as tfmirror
	// opens it: nothing evicted before the engine says what may be.
	limited := strict
	limited.store = cache.Options{MaxBytes: size + size/2, Evictable: func(string) bool { return false }}
	limited.ret = Config{MaxBytes: size + size/2, Interval: -1}
	h.start(limited)
	h.waitIdle()
	h.ret.rebuild() // as a pass does
	if err := cachetest.Evict(t.Context(), h.store); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.engine.CachedSize(importSHA); !ok {
		t.Error("the size limit evicted the import set aside")
	}
	evicted := 0
	for _, v := range []string{"1.0.0", "2.0.0", "3.0.0"} {
		if !h.isCached(v) {
			evicted++
		}
	}
	if evicted < 2 {
		t.Errorf("%d of the origin's archives evicted, want 2 or more: the limit did not press (test broken)", evicted)
	}

	// The rules remove the origin's 1.0.0 (and 2.0.0), not the import.
	h.stop()
	strict.ret = Config{KeepVersions: 1, Interval: -1}
	h.start(strict)
	h.readAll("1.0.0", "2.0.0", "3.0.0")
	done, err := h.ret.Prune(t.Context(), PruneRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := removalNames(done); !reflect.DeepEqual(got, []string{"1.0.0 keep-versions", "2.0.0 keep-versions"}) {
		t.Errorf("the rules removed %v", got)
	}
	for _, rm := range done {
		if slices.Contains(rm.Archives, importSHA) || rm.Withheld {
			t.Errorf("the rules removed the import set aside: %+v", rm)
		}
	}
	if _, ok := h.engine.CachedSize(importSHA); !ok {
		t.Error("the rules removed the import set aside")
	}
	if setAsideSHA(t, h) != importSHA {
		t.Error("the rules took the import out of 1.0.0's record")
	}
}

// A prune naming the version removes what it names: the origin's
// archives and the import set aside in its record, which leaves the
// record and Withheld; the origin's version is served again after it. A
// dry run lists the same. A version withheld whole (never set aside) that
// a prune names leaves Withheld too.
func TestPruneNamedRemovesSetAsideImport(t *testing.T) {
	t.Parallel()
	strict := harnessOptions{cacheDir: t.TempDir()}
	h, importSHA := setAside(t, strict, 1<<10, "1.0.0")
	p := h.provider()
	originSHA := h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")
	if w := h.engine.Withheld(); len(w) != 1 || w[0].Version != "1.0.0" {
		t.Fatalf("Withheld() = %+v, want 1.0.0 (set-up broken)", w)
	}
	done := pruneNamed(t, h, "1.0.0")
	if len(done) != 1 || !done[0].Withheld || done[0].Unlisted || done[0].Rule != RuleNamed ||
		!reflect.DeepEqual(slices.Sorted(slices.Values(done[0].Archives)), slices.Sorted(slices.Values([]string{originSHA, importSHA}))) {
		t.Errorf("the prune removed %+v, want the origin's archive and the import set aside", done)
	}
	for _, sha := range []string{originSHA, importSHA} {
		if _, ok := h.engine.CachedSize(sha); ok {
			t.Errorf("%s is still cached", sha)
		}
	}
	if got := setAsideSHA(t, h); got != "" {
		t.Errorf("1.0.0's record still names the import set aside (%s)", got)
	}
	if w := h.engine.Withheld(); len(w) != 0 {
		t.Errorf("after the prune, Withheld() = %+v", w)
	}
	// The origin's 1.0.0 is served again, and the record stays without it.
	h.readAll("1.0.0")
	h.waitIdle()
	if got := setAsideSHA(t, h); got != "" {
		t.Errorf("fetched again, 1.0.0's record names an import set aside (%s)", got)
	}
	h.stop()
	h.start(strict)
	if w := h.engine.Withheld(); len(w) != 0 {
		t.Errorf("after a restart, Withheld() = %+v", w)
	}

	// Withheld whole: a version the origin does not publish.
	h.stop()
	allowed := harnessOptions{cacheDir: strict.cacheDir, cfg: mirror.Config{UnsignedHosts: []string{originHost}}}
	h.start(allowed)
	in, sha := unsignedImport(t, p, "9.0.0", 1<<10, 9)
	if _, err := h.engine.AirGap().Import(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	h.stop()
	h.start(strict)
	if w := h.engine.Withheld(); len(w) != 1 || w[0].Version != "9.0.0" {
		t.Fatalf("Withheld() = %+v, want 9.0.0", w)
	}
	done, err := h.ret.Prune(t.Context(), PruneRequest{Provider: &p, Versions: []string{"9.0.0"}})
	if err != nil || len(done) != 1 || !done[0].Unlisted || !slices.Contains(done[0].Archives, sha) {
		t.Errorf("the prune of 9.0.0 removed %+v (%v)", done, err)
	}
	if w := h.engine.Withheld(); len(w) != 0 {
		t.Errorf("after the prune of 9.0.0, Withheld() = %+v", w)
	}
}
