package unsigned_test

// A withheld import set aside in the record of the origin's version of
// its number (records.PackageRecord.Withheld): checked by a check of the cache
// and kept out of the shared tier. That retention keeps it, and a prune
// naming the version removes it, is tested in package retention.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/mirror/cachecheck"
	"github.com/tfmirror/tfmirror/v2/mirror/imports"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// setAside imports version 1.0.0 of the test provider without signature
// (an in-house package of about size bytes for linux_amd64, as an earlier
// release allowed under the allowed origin host), then starts the engine
// with strict (which must name the same cacheDir), under which the import
// is withheld, and reads the origin's 1.0.0: the import is set aside in
// the origin's record. The origin publishes versions. It returns the
// harness.Harness and the import's sha256.
func setAside(t *testing.T, strict harness.Options, size int, versions ...string) (*harness.Harness, string) {
	t.Helper()
	allowed := harness.Options{CacheDir: strict.CacheDir, Origin: strict.Origin, Config: harness.Config{UnsignedHosts: []string{harness.OriginHost}}}
	h := harness.New(t, allowed)
	h.Origin.AddProvider(harness.NS, harness.Type, versions, []string{"linux_amd64"})
	zipped := enginetest.ZipOfSize(t, harness.Type, size, 42)
	sum := sha256.Sum256(zipped)
	in := imports.Imported{Provider: h.Provider(), Version: harness.MustVersion(t, "1.0.0"), Unsigned: true, Packages: []imports.Package{{
		Platform: "linux_amd64", Filename: "terraform-provider-" + harness.Type + "_1.0.0_linux_amd64.zip", Document: -1,
		Open: func(context.Context) (io.ReadCloser, int64, error) {
			return io.NopCloser(bytes.NewReader(zipped)), int64(len(zipped)), nil
		},
	}}}
	if _, err := h.Engine.AirGap().Import(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	h.Stop()
	h.Start(strict)
	h.ReadAll("1.0.0")
	h.WaitIdle()
	importSHA := hex.EncodeToString(sum[:])
	if got := setAsideSHA(t, h); got != importSHA {
		t.Fatalf("the import set aside in 1.0.0's record has sha256 %q, want %s (set-up broken)", got, importSHA)
	}
	return h, importSHA
}

// setAsideSHA is the sha256 of the linux_amd64 archive of the import set
// aside in the cached record of 1.0.0; "" when there is none.
func setAsideSHA(t *testing.T, h *harness.Harness) string {
	t.Helper()
	var rec records.PackageRecord
	if _, err := h.Store.GetMeta(records.PackageKey(h.Provider(), harness.MustVersion(t, "1.0.0")), &rec); err != nil {
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

// A check of the cache reads the import set aside as it reads other
// unsigned imports, against its recorded sha256, beside the origin's
// package checked against its evidence; damaged, it is reported, the
// origin's package not.
func TestVerifyCacheChecksSetAsideImport(t *testing.T) {
	t.Parallel()
	h, importSHA := setAside(t, harness.Options{CacheDir: t.TempDir()}, 1<<10, "1.0.0")
	originSHA := h.Origin.SHA256(harness.NS, harness.Type, "1.0.0", "linux_amd64")
	check := func() map[string]cachecheck.Result {
		t.Helper()
		got := map[string]cachecheck.Result{}
		if err := h.Engine.CacheChecker().VerifyCache(t.Context(), func(c cachecheck.Result) { got[c.SHA256] = c }); err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 {
			t.Fatalf("checked %+v, want the origin's package and the import set aside", got)
		}
		for sha, withheld := range map[string]bool{originSHA: false, importSHA: true} {
			c := got[sha]
			by := map[bool]string{false: cachecheck.CheckedEvidence, true: cachecheck.CheckedSHA256}[withheld]
			if c.Kind != "provider" || c.Address != h.Provider().String() || c.Version != "1.0.0" || c.Platform != "linux_amd64" ||
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
	if err := cachetest.FlipBlobByte(h.Store, importSHA, 100); err != nil {
		t.Fatal(err)
	}
	got := check()
	if c := got[importSHA]; c.Reason != string(verify.ReasonChecksum) || c.Problem == "" {
		t.Errorf("the damaged import set aside: %+v, want a checksum failure", c)
	}
	if c := got[originSHA]; c.Problem != "" {
		t.Errorf("the origin's package is intact, but: %+v", c)
	}
	if last, _ := h.Engine.CacheChecker().LastCacheCheck(); last.Checked != 2 || last.Failed != 1 {
		t.Errorf("last check %+v, want 2 checked, 1 failed", last)
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
	tier := harness.NewMemTier()
	strict := harness.Options{CacheDir: t.TempDir(), Config: harness.Config{Shared: tier}}
	h, importSHA := setAside(t, strict, 1<<10, "1.0.0")
	key := records.PackageKey(h.Provider(), harness.MustVersion(t, "1.0.0"))
	h.Stop() // the record is put in the tier in the background
	raw, _, _ := tier.GetMeta(t.Context(), key)
	if raw == nil {
		t.Fatal("the origin's record of 1.0.0 is not in the shared tier")
	}
	if strings.Contains(string(raw), importSHA) || strings.Contains(string(raw), `"withheld"`) {
		t.Errorf("the shared tier's record names the import set aside:\n%s", raw)
	}
	h.Start(strict)
	if got := setAsideSHA(t, h); got != importSHA {
		t.Errorf("restarted, the replica's record sets aside %q, want %s", got, importSHA)
	}
	if _, ok := h.Engine.CachedSize(importSHA); !ok {
		t.Error("restarted, the import's archive is gone")
	}
	if w := h.Engine.Withheld(); len(w) != 1 || w[0].Version != "1.0.0" {
		t.Errorf("restarted, Withheld() = %+v", w)
	}

	// The bucket as the previous release left it: the record with the
	// import set aside in it.
	var local records.PackageRecord
	if _, err := h.Store.GetMeta(key, &local); err != nil {
		t.Fatal(err)
	}
	if err := tier.PutMeta(t.Context(), key, &local); err != nil {
		t.Fatal(err)
	}
	other := &harness.Harness{T: t, Origin: h.Origin}
	other.Start(harness.Options{Config: harness.Config{Shared: tier}})
	if _, err := other.Packages("1.0.0", "linux_amd64"); err != nil {
		t.Fatal(err)
	}
	var copied records.PackageRecord
	if _, err := other.Store.GetMeta(key, &copied); err != nil {
		t.Fatalf("the other replica did not copy the record: %v", err)
	}
	if copied.Withheld != nil || len(other.Engine.Withheld()) != 0 {
		t.Errorf("the other replica took another's import set aside: %+v", copied.Withheld)
	}
}
