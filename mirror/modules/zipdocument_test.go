package modules_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/oci"
)

// A module manifest asked for by digest is judged as the one asked for
// by tag is: with its zip's package. Once the package is evicted and
// cannot be had (a sealed mirror), or the stored package is refused by
// today's rules, the manifest's digest is refused as its tag is, where
// it was answered from the zip's record alone, handing out a manifest
// whose blob is then refused.
func TestModuleDocumentJudgedWithItsPackage(t *testing.T) {
	t.Parallel()
	v := enginetest.MustModuleVersion(t, "1.1.0")
	ctx := context.Background()

	t.Run("sealed", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "cache")
		h := harness.New(t, harness.Options{CacheDir: dir})
		o := h.Origin
		o.AddTarball("vpc-1.1.0.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc\n")}))
		o.AddModule("acme", "vpc", "aws", "1.1.0", o.TarballURL("vpc-1.1.0.tar.gz"))
		first, _, err := readModuleZip(t, h, "1.1.0")
		if err != nil {
			t.Fatal(err)
		}
		doc, err := h.Engine.Modules().Zips().ModuleManifest(ctx, harness.Module, v)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := h.Engine.Modules().Zips().ModuleDocument(ctx, harness.Module, doc.Digest); err != nil || got.Digest != doc.Digest {
			t.Fatalf("manifest by digest with its package held: %v", err)
		}
		h.Stop()
		h.Start(harness.Options{CacheDir: dir, Config: harness.Config{Offline: true}})
		if err := cachetest.DeleteBlob(h.Store, first.Record.Package); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Engine.Modules().Zips().ModuleManifest(ctx, harness.Module, v); !errors.Is(err, records.ErrOffline) {
			t.Errorf("manifest by version: %v, want it refused as the package is", err)
		}
		if _, err := h.Engine.Modules().Zips().ModuleDocument(ctx, harness.Module, doc.Digest); !errors.Is(err, records.ErrOffline) {
			t.Errorf("manifest by digest of a sealed mirror without its package: %v, want it refused as the package is", err)
		}
	})

	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		h := harness.New(t, harness.Options{})
		rec, zsha := earlierDotGIT(t, h, records.ProvenanceOrigin)
		if err := cachetest.DeleteBlob(h.Store, rec.SHA256); err != nil {
			t.Fatal(err)
		}
		info, err := h.Store.StatBlob(zsha)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := oci.ModuleManifest(oci.Layer{SHA256: zsha, Size: info.Size, Title: modules.ZipTitle(harness.Module, v)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Engine.Modules().Zips().ModuleManifest(ctx, harness.Module, v); !errors.Is(err, modules.ErrChanged) {
			t.Errorf("manifest by version: %v, want it refused with its zip", err)
		}
		if got, err := h.Engine.Modules().Zips().ModuleDocument(ctx, harness.Module, doc.Digest); !errors.Is(err, modules.ErrChanged) {
			t.Errorf("manifest by digest of a zip whose package is refused: %v (digest %s), want it refused with its zip", err, got.Digest)
		}
	})
}
