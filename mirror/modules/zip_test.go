package modules_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"path/filepath"
	"sync"
	"testing"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/inventory"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/oci"
)

func readModuleZip(t *testing.T, h *harness.Harness, version string) (*modules.Zip, []byte, error) {
	t.Helper()
	z, err := h.Engine.Modules().Zips().OpenModuleZip(context.Background(), harness.Module, enginetest.MustModuleVersion(t, version))
	if err != nil {
		return nil, nil, err
	}
	defer z.Close()
	b, err := io.ReadAll(z.Content())
	return z, b, err
}

// A module version's zip is made once from its package, whatever the
// concurrency, with one fetch from its source; it holds the package's
// files; its sha256 is recorded and resolves back to the version; made
// again after its blob is gone (and after a restart, sealed) it gives
// the same bytes.
func TestModuleZipMadeOnceStableAndSealed(t *testing.T) {
	t.Parallel()
	needGit(t)
	dir := filepath.Join(t.TempDir(), "cache")
	h := harness.New(t, harness.Options{CacheDir: dir})
	o := h.Origin
	if _, err := o.AddGitRepo("vpc", map[string][]byte{"main.tf": []byte("# vpc\n"), "sub/x.tf": []byte("# x\n")}, "v1.0.0"); err != nil {
		t.Fatal(err)
	}
	o.AddModule("acme", "vpc", "aws", "v1.0.0", "git::"+o.GitURL("vpc")+"?ref=v1.0.0")
	if _, _, err := h.Engine.Modules().ModuleVersions(context.Background(), harness.Module); err != nil {
		t.Fatal(err)
	}

	const callers = 20
	var wg sync.WaitGroup
	zips := make([][]byte, callers)
	sources := make([]records.Source, callers)
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() {
			var z *modules.Zip
			z, zips[i], errs[i] = readModuleZip(t, h, "1.0.0")
			if z != nil {
				sources[i] = z.Source
			}
		})
	}
	wg.Wait()
	misses := 0
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if !bytes.Equal(zips[i], zips[0]) {
			t.Fatalf("caller %d read other bytes", i)
		}
		if sources[i] == records.Miss {
			misses++
		}
	}
	if misses != 1 {
		t.Errorf("%d callers made the zip, want 1", misses)
	}
	if n := o.Hits(fakeorigin.ModuleDownload); n != 1 {
		t.Errorf("%d module download requests, want 1", n)
	}
	zr, err := zip.NewReader(bytes.NewReader(zips[0]), int64(len(zips[0])))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	if got := names; len(got) != 3 || got[0] != "main.tf" || got[1] != "sub/" || got[2] != "sub/x.tf" {
		t.Errorf("the zip holds %q", got)
	}
	sum := sha256.Sum256(zips[0])
	sha := hex.EncodeToString(sum[:])
	z, _, err := readModuleZip(t, h, "1.0.0")
	if err != nil || z.Source != records.Hit || z.Record.SHA256 != sha || z.Record.Size != int64(len(zips[0])) {
		t.Fatalf("second open: %+v, %v", z, err)
	}
	if v, ok, err := h.Engine.Modules().Zips().ModuleZipVersion(harness.Module, sha); err != nil || !ok || v.String() != "1.0.0" {
		t.Errorf("ModuleZipVersion: %s, %v, %v; want 1.0.0", v, ok, err)
	}
	if _, ok, err := h.Engine.Modules().Zips().ModuleZipVersion(harness.Module, z.Record.Package); err != nil || ok {
		t.Errorf("the package's sha256 resolved as a zip: %v, %v", ok, err)
	}

	// The zip evicted: made again from the cached package, same bytes.
	if err := cachetest.DeleteBlob(h.Store, sha); err != nil {
		t.Fatal(err)
	}
	o.ResetHits()
	z, again, err := readModuleZip(t, h, "1.0.0")
	if err != nil || z.Source != records.Miss || !bytes.Equal(again, zips[0]) {
		t.Fatalf("made again: %v, same bytes %v", err, bytes.Equal(again, zips[0]))
	}
	if n := o.TotalHits(); n != 0 {
		t.Errorf("making the zip again made %d origin requests", n)
	}

	// After a restart, sealed, with the zip gone: made from the package.
	if err := cachetest.DeleteBlob(h.Store, sha); err != nil {
		t.Fatal(err)
	}
	h.Stop()
	h.Start(harness.Options{CacheDir: dir, Config: harness.Config{Offline: true}})
	if _, again, err := readModuleZip(t, h, "1.0.0"); err != nil || !bytes.Equal(again, zips[0]) {
		t.Errorf("sealed, after a restart: %v", err)
	}
	if _, _, err := readModuleZip(t, h, "2.0.0"); !errors.Is(err, records.ErrOffline) {
		t.Errorf("sealed, not cached: %v, want records.ErrOffline", err)
	}
	if n := o.TotalHits(); n != 0 {
		t.Errorf("the sealed engine made %d origin requests", n)
	}
}

// linkLoopPackage is a package a zip cannot hold: a link to a directory
// holding it.
func linkLoopPackage(t *testing.T) []byte {
	t.Helper()
	var tgz bytes.Buffer
	gz := gzip.NewWriter(&tgz)
	tw := tar.NewWriter(gz)
	for _, h := range []*tar.Header{
		{Name: "main.tf", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2},
		{Name: "sub/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "sub/up", Typeflag: tar.TypeSymlink, Linkname: ".."},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte("#\n"))
		}
	}
	tw.Close()
	gz.Close()
	return tgz.Bytes()
}

// A package that a zip cannot hold (a link to a directory holding it)
// is refused, and nothing is recorded.
func TestModuleZipRefusesLinkLoop(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{})
	o := h.Origin
	o.AddTarball("vpc.tar.gz", linkLoopPackage(t))
	o.AddModule("acme", "vpc", "aws", "1.0.0", o.TarballURL("vpc.tar.gz"))
	if _, _, err := h.Engine.Modules().ModuleVersions(context.Background(), harness.Module); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.ReadModule("1.0.0"); err != nil {
		t.Fatalf("the package itself: %v", err)
	}
	if _, _, err := readModuleZip(t, h, "1.0.0"); err == nil {
		t.Fatal("a package with a link loop made a zip")
	}
	var rec records.ModuleZipRecord
	if _, err := h.Store.GetMeta(records.ModuleZipKey(harness.Module, versions.MustParseVersion("1.0.0")), &rec); err == nil {
		t.Errorf("a zip record was kept: %+v", rec)
	}
}

// A version's zip is one of its blobs for retention, and its record
// goes with the version's.
func TestModuleZipHeldWithItsVersion(t *testing.T) {
	t.Parallel()
	needGit(t)
	h := harness.New(t, harness.Options{})
	o := h.Origin
	if _, err := o.AddGitRepo("vpc", map[string][]byte{"main.tf": []byte("# vpc\n")}, "v1.0.0"); err != nil {
		t.Fatal(err)
	}
	o.AddModule("acme", "vpc", "aws", "1.0.0", "git::"+o.GitURL("vpc")+"?ref=v1.0.0")
	z, _, err := readModuleZip(t, h, "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	var got []inventory.Record
	if err := h.Engine.Inventory().ScanVersions(func(v inventory.Record) { got = append(got, v) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[0].Archives) != 2 || got[0].Archives[0] != z.Record.Package || got[0].Archives[1] != z.Record.SHA256 {
		t.Fatalf("held: %+v; want the package and the zip %s", got, z.Record.SHA256)
	}
	if err := h.Engine.Inventory().RemoveVersion("module", harness.Module.String(), "1.0.0"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := h.Engine.Modules().Zips().ModuleZipVersion(harness.Module, z.Record.SHA256); ok || err != nil {
		t.Errorf("the zip record outlived its version: %v, %v", ok, err)
	}
}

// A zip is judged with its package. Once the package is evicted (the
// cache's budget, a prune) while the zip stays, the zip is not served on
// its record alone: it is made again of the package as the module side
// serves it, and served when that gives the bytes recorded; when the
// package is refused (stored by an earlier release holding .GIT, which
// today's rules leave out, so the source no longer gives its bytes) or
// cannot be had (a sealed mirror), the zip is refused as the package is,
// and kept; so is its manifest, by version and by digest (which was
// answered from the zip's record alone, handing out a manifest whose
// blob was then refused).
func TestModuleZipJudgedWithItsPackage(t *testing.T) {
	t.Parallel()
	v := enginetest.MustModuleVersion(t, "1.1.0")
	ctx := context.Background()

	t.Run("unchanged", func(t *testing.T) {
		t.Parallel()
		h := harness.New(t, harness.Options{})
		o := h.Origin
		o.AddTarball("vpc-1.1.0.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc\n")}))
		o.AddModule("acme", "vpc", "aws", "1.1.0", o.TarballURL("vpc-1.1.0.tar.gz"))
		first, want, err := readModuleZip(t, h, "1.1.0")
		if err != nil {
			t.Fatal(err)
		}
		if err := cachetest.DeleteBlob(h.Store, first.Record.Package); err != nil {
			t.Fatal(err)
		}
		o.ResetHits()
		z, got, err := readModuleZip(t, h, "1.1.0")
		if err != nil || !bytes.Equal(got, want) || z.Record != first.Record {
			t.Fatalf("zip after its package was evicted: %v; want the same zip", err)
		}
		if _, err := h.Store.StatBlob(first.Record.Package); err != nil || o.TotalHits() == 0 {
			t.Errorf("package %s: %v after %d origin requests; want it fetched again with the zip", first.Record.Package, err, o.TotalHits())
		}
	})

	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		h := harness.New(t, harness.Options{})
		rec, zsha := earlierDotGIT(t, h, records.ProvenanceOrigin)
		if err := cachetest.DeleteBlob(h.Store, rec.SHA256); err != nil {
			t.Fatal(err)
		}
		_, perr := h.Engine.Modules().OpenModule(ctx, harness.Module, v)
		if perr == nil {
			t.Fatal("package served")
		}
		z, body, err := readModuleZip(t, h, "1.1.0")
		if err == nil {
			t.Fatalf("zip %s served (holds .GIT: %v) while its package is refused (%v)", z.Record.SHA256, holdsDotGIT(t, body), perr)
		}
		if !errors.Is(err, modules.ErrChanged) || !errors.Is(perr, modules.ErrChanged) {
			t.Errorf("zip: %v; package: %v; want both refused as changed", err, perr)
		}
		if _, err := h.Engine.Modules().Zips().ModuleManifest(ctx, harness.Module, v); !errors.Is(err, modules.ErrChanged) {
			t.Errorf("manifest: %v, want it refused with its zip", err)
		}
		info, err := h.Store.StatBlob(zsha)
		if err != nil {
			t.Fatalf("zip blob: %v, want it kept", err)
		}
		// By digest as by version: the manifest the zip's record makes.
		doc, err := oci.ModuleManifest(oci.Layer{SHA256: zsha, Size: info.Size, Title: modules.ZipTitle(harness.Module, v)})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := h.Engine.Modules().Zips().ModuleDocument(ctx, harness.Module, doc.Digest); !errors.Is(err, modules.ErrChanged) {
			t.Errorf("manifest by digest of a zip whose package is refused: %v (digest %s), want it refused with its zip", err, got.Digest)
		}
	})

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
		if _, _, err := readModuleZip(t, h, "1.1.0"); !errors.Is(err, records.ErrOffline) {
			t.Errorf("zip of a sealed mirror without its package: %v, want it refused as the package is", err)
		}
		if _, err := h.Engine.Modules().Zips().ModuleManifest(ctx, harness.Module, v); !errors.Is(err, records.ErrOffline) {
			t.Errorf("manifest by version: %v, want it refused as the package is", err)
		}
		if _, err := h.Engine.Modules().Zips().ModuleDocument(ctx, harness.Module, doc.Digest); !errors.Is(err, records.ErrOffline) {
			t.Errorf("manifest by digest of a sealed mirror without its package: %v, want it refused as the package is", err)
		}
		if _, err := h.Store.StatBlob(first.Record.SHA256); err != nil {
			t.Errorf("zip blob: %v, want it kept", err)
		}
	})
}
