package modules_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// otherBytes is pkg, a package tar.gz, compressed again at another
// level: the same package in the bytes another Go release's compressor
// writes.
func otherBytes(t *testing.T, pkg []byte) []byte {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(pkg))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(gz)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w, _ := gzip.NewWriterLevel(&out, gzip.BestSpeed)
	w.Write(raw)
	w.Close()
	if bytes.Equal(out.Bytes(), pkg) {
		t.Fatal("recompressed to the same bytes")
	}
	return out.Bytes()
}

// asFirstStored rewrites the record of version of m as if the package
// had first been stored as first (other bytes of the same package), by a
// release that kept the tree (keepTree) or not, and the version's zip
// made of them, the cache holding neither package any more (evicted).
func asFirstStored(t *testing.T, h *harness.Harness, m addrs.Module, version string, first []byte, keepTree bool) records.ModuleRecord {
	t.Helper()
	key := records.ModuleRecordKey(m, versions.MustParseVersion(version))
	var rec records.ModuleRecord
	if _, err := h.Store.GetMeta(key, &rec); err != nil {
		t.Fatal(err)
	}
	if err := cachetest.DeleteBlob(h.Store, rec.SHA256); err != nil {
		t.Fatal(err)
	}
	rec.SHA256, rec.Size = sha256Hex(first), int64(len(first))
	if !keepTree {
		rec.Tree = ""
	}
	if err := h.Store.PutMeta(key, &rec); err != nil {
		t.Fatal(err)
	}
	// The version's zip, when one was made, was made of those bytes.
	zkey := records.ModuleZipKey(m, versions.MustParseVersion(version))
	var z records.ModuleZipRecord
	if _, err := h.Store.GetMeta(zkey, &z); err == nil {
		z.Package = rec.SHA256
		if err := h.Store.PutMeta(zkey, &z); err != nil {
			t.Fatal(err)
		}
	}
	return rec
}

// A module package fetched again once evicted is the one first mirrored
// when it holds the same tree, whatever its bytes: a mirror built with a
// Go release whose compressor writes other bytes (Go 1.27's) serves it,
// and the record takes the new sha256; the zip of the version, judged by
// its own bytes, is the one first made. Another tree is still refused
// (ErrChanged).
func TestModuleFetchedAgainInOtherBytesIsTheSamePackage(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{Config: harness.Config{ScratchDir: t.TempDir()}})
	o := h.Origin
	o.AddTarball("m.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# one\n"), "sub/x.tf": []byte("x\n")}))
	o.AddModule("acme", "tarball", "aws", "0.1.0", o.TarballURL("m.tar.gz"))
	ctx := context.Background()
	v := enginetest.MustModuleVersion(t, "0.1.0")
	mods := h.Engine.Modules()
	pkg, err := mods.OpenModule(ctx, harness.TarballModule, v)
	if err != nil {
		t.Fatal(err)
	}
	now, _ := io.ReadAll(pkg.Content())
	pkg.Close()
	if !bytes.HasPrefix([]byte(pkg.Record.Tree), []byte("t1:")) {
		t.Fatalf("record's tree %q", pkg.Record.Tree)
	}
	z, err := mods.Zips().OpenModuleZip(ctx, harness.TarballModule, v)
	if err != nil {
		t.Fatal(err)
	}
	zipSHA := z.Record.SHA256
	z.Close()

	first := asFirstStored(t, h, harness.TarballModule, "0.1.0", otherBytes(t, now), true)
	z, err = mods.Zips().OpenModuleZip(ctx, harness.TarballModule, v)
	if err != nil {
		t.Fatalf("the zip made again of the package fetched again: %v", err)
	}
	if z.Record.SHA256 != zipSHA || z.Record.Package != sha256Hex(now) {
		t.Errorf("zip %s of package %s, want %s of %s", z.Record.SHA256, z.Record.Package, zipSHA, sha256Hex(now))
	}
	z.Close()
	var rec records.ModuleRecord
	if _, err := h.Store.GetMeta(records.ModuleRecordKey(harness.TarballModule, v), &rec); err != nil || rec.SHA256 != sha256Hex(now) || rec.Tree != first.Tree {
		t.Errorf("record after the fetch: %+v, %v; want sha256 %s", rec, err, sha256Hex(now))
	}

	// Another tree at the source is refused, as before.
	asFirstStored(t, h, harness.TarballModule, "0.1.0", otherBytes(t, now), true)
	o.AddTarball("m.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# two\n"), "sub/x.tf": []byte("x\n")}))
	if _, err := mods.OpenModule(ctx, harness.TarballModule, v); !errors.Is(err, modules.ErrChanged) {
		t.Errorf("another tree fetched again: %v, want ErrChanged", err)
	}
}

// A record of an earlier release, which kept no tree, takes its
// package's tree when the package is next read from the cache; once
// evicted, an archive's package is then known for the same in other
// bytes. Without the tree (evicted before it was read), it is not: the
// fetch is refused, as before.
func TestModuleRecordOfAnEarlierReleaseTakesItsTree(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{Config: harness.Config{ScratchDir: t.TempDir()}})
	o := h.Origin
	o.AddTarball("m.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# one\n")}))
	o.AddModule("acme", "tarball", "aws", "0.1.0", o.TarballURL("m.tar.gz"))
	ctx := context.Background()
	v := enginetest.MustModuleVersion(t, "0.1.0")
	key := records.ModuleRecordKey(harness.TarballModule, v)
	mods := h.Engine.Modules()
	pkg, err := mods.OpenModule(ctx, harness.TarballModule, v)
	if err != nil {
		t.Fatal(err)
	}
	now, _ := io.ReadAll(pkg.Content())
	pkg.Close()
	tree := pkg.Record.Tree

	// Evicted before it was read again: refused.
	asFirstStored(t, h, harness.TarballModule, "0.1.0", otherBytes(t, now), false)
	if _, err := mods.OpenModule(ctx, harness.TarballModule, v); !errors.Is(err, modules.ErrChanged) {
		t.Errorf("an earlier release's record, its package evicted: %v, want ErrChanged", err)
	}

	// Read from the cache first: the record takes the tree.
	var rec records.ModuleRecord
	h.Store.GetMeta(key, &rec)
	old := otherBytes(t, now)
	sha, err := cachetest.PutBlob(h.Store, old)
	if err != nil {
		t.Fatal(err)
	}
	rec.SHA256, rec.Size, rec.Tree = sha, int64(len(old)), ""
	h.Store.PutMeta(key, &rec)
	pkg, err = mods.OpenModule(ctx, harness.TarballModule, v)
	if err != nil {
		t.Fatal(err)
	}
	pkg.Close()
	if _, err := h.Store.GetMeta(key, &rec); err != nil || rec.Tree != tree || rec.SHA256 != sha {
		t.Fatalf("record read from the cache: %+v, %v; want tree %s", rec, err, tree)
	}
	if err := cachetest.DeleteBlob(h.Store, sha); err != nil {
		t.Fatal(err)
	}
	if _, got, err := openAll(mods, v); err != nil || !bytes.Equal(got, now) {
		t.Errorf("fetched again once its tree was kept: %v", err)
	}
}

func openAll(mods *modules.Modules, v versions.Version) (*modules.Package, []byte, error) {
	pkg, err := mods.OpenModule(context.Background(), harness.TarballModule, v)
	if err != nil {
		return nil, nil, err
	}
	defer pkg.Close()
	b, err := io.ReadAll(pkg.Content())
	return pkg, b, err
}

// An import of a module version whose package the cache holds in other
// bytes (exported by a mirror built with another Go release) is the
// same package: present while the cache holds its own, else the record
// takes the imported bytes. Another tree is refused.
func TestImportModuleInOtherBytesIsTheSamePackage(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{Config: harness.Config{ScratchDir: t.TempDir()}})
	o := h.Origin
	o.AddTarball("m.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# one\n")}))
	loc := o.TarballURL("m.tar.gz")
	o.AddModule("acme", "tarball", "aws", "0.1.0", loc)
	ctx := context.Background()
	v := enginetest.MustModuleVersion(t, "0.1.0")
	mods := h.Engine.Modules()
	_, now, err := openAll(mods, v)
	if err != nil {
		t.Fatal(err)
	}
	other := otherBytes(t, now)
	in := modules.Imported{Module: harness.TarballModule, Version: "0.1.0", Location: loc, SHA256: sha256Hex(other), Open: opener(other)}
	res, err := mods.ImportModule(ctx, in)
	if err != nil || !res.Present {
		t.Fatalf("import of the cached package in other bytes: %+v, %v; want present", res, err)
	}
	if pkg, got, err := openAll(mods, v); err != nil || !bytes.Equal(got, now) || pkg.Source != records.Hit {
		t.Errorf("after the import, served %v: another package", err)
	}

	// Evicted: the record takes the imported bytes.
	if err := cachetest.DeleteBlob(h.Store, sha256Hex(now)); err != nil {
		t.Fatal(err)
	}
	if _, err := mods.ImportModule(ctx, in); err != nil {
		t.Fatalf("import once evicted: %v", err)
	}
	if pkg, got, err := openAll(mods, v); err != nil || !bytes.Equal(got, other) || pkg.Source != records.Hit {
		t.Errorf("after the import once evicted: %v, want the imported bytes from the cache", err)
	}

	changed := fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# two\n")})
	if _, err := mods.ImportModule(ctx, modules.Imported{Module: harness.TarballModule, Version: "0.1.0", Location: loc,
		SHA256: sha256Hex(changed), Open: opener(changed)}); err == nil {
		t.Error("an import of another tree: accepted")
	}
}
