package modules_test

import (
	"context"
	"crypto/rand"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// A zip served from the cache keeps its package in use: the zip is
// served only with its package held (a zip whose package is gone is made
// again of the package fetched again), so the size limit, which evicts
// the blob least recently used, must not take the package of a zip that
// clients keep downloading (the download answer names the zip, and
// nothing reads the tar.gz any more) before the zip itself. Else the
// next download fetches the package from its source again, and fails
// while the source is down, though the zip was cached.
func TestModuleZipKeepsItsPackageInUse(t *testing.T) {
	t.Parallel()
	const size = 256 << 10
	h := harness.New(t, harness.Options{Store: cache.Options{MaxBytes: 2*size + size/2}})
	o := h.Origin
	noise := func() []byte {
		b := make([]byte, size)
		rand.Read(b)
		return b
	}
	o.AddTarball("vpc.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("#\n"), "data.bin": noise()}))
	o.AddModule("acme", "vpc", "aws", "1.0.0", o.TarballURL("vpc.tar.gz"))
	o.AddTarball("other.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("#\n"), "data.bin": noise()}))
	o.AddModule("acme", "other", "aws", "1.0.0", o.TarballURL("other.tar.gz"))
	ctx := context.Background()
	other, err := addrs.ParseModule(harness.OriginHost + "/acme/other/aws")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []addrs.Module{harness.Module, other} {
		if _, _, err := h.Engine.Modules().ModuleVersions(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	z, _, err := readModuleZip(t, h, "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	// Clients keep installing it: the zip is read, the package is not.
	for range 3 {
		if _, _, err := readModuleZip(t, h, "1.0.0"); err != nil {
			t.Fatal(err)
		}
	}
	// Another module's package takes the cache past its limit: one blob
	// goes, the least recently used.
	pkg, err := h.Engine.Modules().OpenModule(ctx, other, enginetest.MustModuleVersion(t, "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	pkg.Close()
	if err := cachetest.Evict(ctx, h.Store); err != nil {
		t.Fatal(err)
	}
	_, zipErr := h.Store.StatBlob(z.Record.SHA256)
	_, pkgErr := h.Store.StatBlob(z.Record.Package)
	if zipErr == nil && pkgErr == nil {
		t.Fatal("nothing of the module's was evicted (set-up broken)")
	}
	o.SetDown(503)
	if _, _, err := readModuleZip(t, h, "1.0.0"); err != nil {
		t.Errorf("the zip clients kept downloading, its source down: %v", err)
	}
}
