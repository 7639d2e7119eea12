package mirror

// A withheld import set aside in the record of the origin's version of
// its number (PackageRecord.Withheld): checked by a check of the cache,
// never evicted by the size limit nor removed by the rules, removed by a
// prune naming the version, and kept out of the shared tier.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/cache"
	"github.com/tfmirror/tfmirror/internal/cachetest"
	"github.com/tfmirror/tfmirror/verify"
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
	allowed := harnessOptions{cacheDir: strict.cacheDir, origin: strict.origin, cfg: Config{UnsignedHosts: []string{originHost}}}
	h := newHarness(t, allowed)
	h.origin.AddProvider(ns, typ, versions, []string{"linux_amd64"})
	zipped := zipOfSize(t, typ, size, 42)
	sum := sha256.Sum256(zipped)
	in := Imported{Provider: h.provider(), Version: mustVersion(t, "1.0.0"), Unsigned: true, Packages: []ImportedPackage{{
		Platform: "linux_amd64", Filename: "terraform-provider-" + typ + "_1.0.0_linux_amd64.zip", Document: -1,
		Open: func(context.Context) (io.ReadCloser, int64, error) {
			return io.NopCloser(bytes.NewReader(zipped)), int64(len(zipped)), nil
		},
	}}}
	if _, err := h.engine.Import(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	h.stop()
	h.start(strict)
	h.readAll("1.0.0")
	h.waitIdle()
	importSHA := hex.EncodeToString(sum[:])
	if got := setAsideSHA(t, h); got != importSHA {
		t.Fatalf("the import set aside in 1.0.0's record has sha256 %q, want %s (set-up broken)", got, importSHA)
	}
	return h, importSHA
}

// setAsideSHA is the sha256 of the linux_amd64 archive of the import set
// aside in the cached record of 1.0.0; "" when there is none.
func setAsideSHA(t *testing.T, h *harness) string {
	t.Helper()
	var rec PackageRecord
	if _, err := h.store.GetMeta(packageKey(h.provider(), mustVersion(t, "1.0.0")), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Provenance != ProvenanceOrigin {
		t.Fatalf("1.0.0's record is %q, want the origin's", rec.Provenance)
	}
	if rec.Withheld == nil {
		return ""
	}
	return rec.Withheld.Archives["linux_amd64"].SHA256
}

// A check of the cache reads the import set aside as it reads other
// unsigned imports, against its recorded sha256, beside the origin's
// package checked against its evidence; damaged, it is reported, the
// origin's package not.
func TestVerifyCacheChecksSetAsideImport(t *testing.T) {
	t.Parallel()
	h, importSHA := setAside(t, harnessOptions{cacheDir: t.TempDir()}, 1<<10, "1.0.0")
	originSHA := h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")
	check := func() map[string]CachedCheck {
		t.Helper()
		got := map[string]CachedCheck{}
		if err := h.engine.VerifyCache(t.Context(), func(c CachedCheck) { got[c.SHA256] = c }); err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 {
			t.Fatalf("checked %+v, want the origin's package and the import set aside", got)
		}
		for sha, withheld := range map[string]bool{originSHA: false, importSHA: true} {
			c := got[sha]
			by := map[bool]string{false: CheckedEvidence, true: CheckedSHA256}[withheld]
			if c.Kind != "provider" || c.Address != h.provider().String() || c.Version != "1.0.0" || c.Platform != "linux_amd64" ||
				c.Withheld != withheld || c.By != by {
				t.Errorf("%s: %+v, want withheld %v, checked by %s", sha, c, withheld, by)
			}
		}
		return got
	}
	for sha, c := range check() {
		if c.Problem != "" {
			t.Errorf("%s is intact, but: %+v", sha, c)
		}
	}
	if err := cachetest.FlipBlobByte(h.store, importSHA, 100); err != nil {
		t.Fatal(err)
	}
	got := check()
	if c := got[importSHA]; c.Reason != string(verify.ReasonChecksum) || c.Problem == "" {
		t.Errorf("the damaged import set aside: %+v, want a checksum failure", c)
	}
	if c := got[originSHA]; c.Problem != "" {
		t.Errorf("the origin's package is intact, but: %+v", c)
	}
	if last, _ := h.engine.LastCacheCheck(); last.Checked != 2 || last.Failed != 1 {
		t.Errorf("last check %+v, want 2 checked, 1 failed", last)
	}
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
	limited.cfg.Retention = Retention{MaxBytes: size + size/2, Interval: -1}
	h.start(limited)
	h.waitIdle()
	h.engine.ret.rebuild() // as a pass does
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
	strict.cfg.Retention = Retention{KeepVersions: 1, Interval: -1}
	h.start(strict)
	h.readAll("1.0.0", "2.0.0", "3.0.0")
	done, err := h.engine.Prune(t.Context(), PruneRequest{})
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
	req := PruneRequest{Provider: &p, Versions: []string{"1.0.0"}}
	dry := req
	dry.DryRun = true
	planned, err := h.engine.Prune(t.Context(), dry)
	if err != nil {
		t.Fatal(err)
	}
	done, err := h.engine.Prune(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 1 || !done[0].Withheld || done[0].Unlisted || done[0].Rule != RuleNamed ||
		!reflect.DeepEqual(slices.Sorted(slices.Values(done[0].Archives)), slices.Sorted(slices.Values([]string{originSHA, importSHA}))) {
		t.Errorf("the prune removed %+v, want the origin's archive and the import set aside", done)
	}
	if !reflect.DeepEqual(done, planned) {
		t.Errorf("the dry run listed %+v, the prune removed %+v", planned, done)
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
	allowed := harnessOptions{cacheDir: strict.cacheDir, cfg: Config{UnsignedHosts: []string{originHost}}}
	h.start(allowed)
	in, sha := unsignedImport(t, p, "9.0.0")
	if _, err := h.engine.Import(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	h.stop()
	h.start(strict)
	if w := h.engine.Withheld(); len(w) != 1 || w[0].Version != "9.0.0" {
		t.Fatalf("Withheld() = %+v, want 9.0.0", w)
	}
	done, err = h.engine.Prune(t.Context(), PruneRequest{Provider: &p, Versions: []string{"9.0.0"}})
	if err != nil || len(done) != 1 || !done[0].Unlisted || !slices.Contains(done[0].Archives, sha) {
		t.Errorf("the prune of 9.0.0 removed %+v (%v)", done, err)
	}
	if w := h.engine.Withheld(); len(w) != 0 {
		t.Errorf("after the prune of 9.0.0, Withheld() = %+v", w)
	}
}

// With a shared tier, the import set aside stays in the cache of the
// replica that holds it: the record the replica puts in the bucket is
// the origin's without it, the import is kept (restarted, the replica
// still withholds it and holds its archive), and another replica that
// copies the bucket's record (even one that names an import, as shared
// before this release) keeps none.
func TestSetAsideImportStaysOutOfSharedTier(t *testing.T) {
	t.Parallel()
	tier := newMemTier()
	strict := harnessOptions{cacheDir: t.TempDir(), cfg: Config{Shared: tier}}
	h, importSHA := setAside(t, strict, 1<<10, "1.0.0")
	key := packageKey(h.provider(), mustVersion(t, "1.0.0"))
	h.stop() // the record is put in the tier in the background
	raw, _, _ := tier.GetMeta(t.Context(), key)
	if raw == nil {
		t.Fatal("the origin's record of 1.0.0 is not in the shared tier")
	}
	if strings.Contains(string(raw), importSHA) || strings.Contains(string(raw), `"withheld"`) {
		t.Errorf("the shared tier's record names the import set aside:\n%s", raw)
	}
	h.start(strict)
	if got := setAsideSHA(t, h); got != importSHA {
		t.Errorf("restarted, the replica's record sets aside %q, want %s", got, importSHA)
	}
	if _, ok := h.engine.CachedSize(importSHA); !ok {
		t.Error("restarted, the import's archive is gone")
	}
	if w := h.engine.Withheld(); len(w) != 1 || w[0].Version != "1.0.0" {
		t.Errorf("restarted, Withheld() = %+v", w)
	}

	// The bucket as the previous release left it: the record with the
	// import set aside in it.
	var local PackageRecord
	if _, err := h.store.GetMeta(key, &local); err != nil {
		t.Fatal(err)
	}
	if err := tier.PutMeta(t.Context(), key, &local); err != nil {
		t.Fatal(err)
	}
	other := &harness{t: t, origin: h.origin}
	other.start(harnessOptions{cfg: Config{Shared: tier}})
	if _, err := other.packages("1.0.0", "linux_amd64"); err != nil {
		t.Fatal(err)
	}
	var copied PackageRecord
	if _, err := other.store.GetMeta(key, &copied); err != nil {
		t.Fatalf("the other replica did not copy the record: %v", err)
	}
	if copied.Withheld != nil || len(other.engine.Withheld()) != 0 {
		t.Errorf("the other replica took another's import set aside: %+v", copied.Withheld)
	}
}
