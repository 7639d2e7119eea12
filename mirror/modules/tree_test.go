package modules_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// oneTarball puts at h's origin the tarball m.tar.gz of one file and the
// versions of harness.TarballModule it is the package of, and returns
// its location.
func oneTarball(h *harness.Harness, versions ...string) string {
	loc := h.Origin.TarballURL("m.tar.gz")
	h.Origin.AddTarball("m.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# one\n")}))
	for _, v := range versions {
		h.Origin.AddModule("acme", "tarball", "aws", v, loc)
	}
	return loc
}

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
	oneTarball(h, "0.1.0")
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
	loc := oneTarball(h, "0.1.0")
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

// An import names the Git commit of its package, but nothing binds the
// package's files to that commit: a version of a Git module whose record
// (of an earlier release) has no tree, its package evicted, is not
// another package for a bundle that names its commit. The fetch, which
// resolves the commit itself, is what the commit vouches for.
func TestImportModuleCommitDoesNotVouchForTheFiles(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{Config: harness.Config{ScratchDir: t.TempDir()}})
	ctx := context.Background()
	mods := h.Engine.Modules()
	m := addrs.Module{Hostname: harness.OriginHost, Namespace: "acme", Name: "gitmod", System: "aws"}
	v := enginetest.MustModuleVersion(t, "1.0.0")
	loc := "git::https://" + harness.OriginHost + "/acme/gitmod.git?ref=v1.0.0"
	commit := strings.Repeat("c", 40)
	first := fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# first\n")})
	if _, err := mods.ImportModule(ctx, modules.Imported{Module: m, Version: "1.0.0", Location: loc, Commit: commit,
		SHA256: sha256Hex(first), Open: opener(first)}); err != nil {
		t.Fatal(err)
	}
	// As an earlier release kept it, fetched from its source at that
	// commit, and evicted.
	key := records.ModuleRecordKey(m, v)
	var rec records.ModuleRecord
	if _, err := h.Store.GetMeta(key, &rec); err != nil || rec.Kind != modsource.KindGit || rec.Commit != commit {
		t.Fatalf("record %+v, %v", rec, err)
	}
	rec.Tree, rec.Provenance = "", records.ProvenanceOrigin
	if err := h.Store.PutMeta(key, &rec); err != nil {
		t.Fatal(err)
	}
	if err := cachetest.DeleteBlob(h.Store, rec.SHA256); err != nil {
		t.Fatal(err)
	}

	other := fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# other\n")})
	_, err := mods.ImportModule(ctx, modules.Imported{Module: m, Version: "1.0.0", Location: loc, Commit: commit,
		SHA256: sha256Hex(other), Open: opener(other)})
	if !errors.Is(err, verify.ErrIntegrity) {
		t.Errorf("an import of other files naming the commit: %v, want an integrity error", err)
	}
	if _, err := h.Store.GetMeta(key, &rec); err != nil || rec.SHA256 != sha256Hex(first) {
		t.Errorf("the record names %s, want the package first stored (%s)", rec.SHA256, sha256Hex(first))
	}
}

// Versions of one package (two versions of a module at one tarball, or
// one commit) each take its tree when read from the cache, each record
// in turn, not only the first read.
func TestModuleRecordsOfOnePackageEachTakeTheTree(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{Config: harness.Config{ScratchDir: t.TempDir()}})
	oneTarball(h, "0.1.0", "0.2.0")
	ctx := context.Background()
	mods := h.Engine.Modules()
	var tree string
	for _, raw := range []string{"0.1.0", "0.2.0"} {
		pkg, err := mods.OpenModule(ctx, harness.TarballModule, enginetest.MustModuleVersion(t, raw))
		if err != nil {
			t.Fatal(err)
		}
		pkg.Close()
		tree = pkg.Record.Tree
	}
	// As an earlier release kept them.
	for _, raw := range []string{"0.1.0", "0.2.0"} {
		key := records.ModuleRecordKey(harness.TarballModule, enginetest.MustModuleVersion(t, raw))
		var rec records.ModuleRecord
		h.Store.GetMeta(key, &rec)
		rec.Tree = ""
		if err := h.Store.PutMeta(key, &rec); err != nil {
			t.Fatal(err)
		}
	}
	for _, raw := range []string{"0.1.0", "0.2.0"} {
		v := enginetest.MustModuleVersion(t, raw)
		pkg, err := mods.OpenModule(ctx, harness.TarballModule, v)
		if err != nil {
			t.Fatal(err)
		}
		pkg.Close()
		var rec records.ModuleRecord
		if _, err := h.Store.GetMeta(records.ModuleRecordKey(harness.TarballModule, v), &rec); err != nil || rec.Tree != tree {
			t.Errorf("%s read from the cache: its record's tree %q (%v), want %q", raw, rec.Tree, err, tree)
		}
	}
}

// notWritable is a cache whose records cannot be written once full is
// set (cache.ErrNotWritable: a disk below its reserve, a database open
// read-only), and that counts the opens of blob sha.
type notWritable struct {
	harness.Store
	full  atomic.Bool
	sha   atomic.Value // string
	opens atomic.Int64
}

func (s *notWritable) PutMeta(key string, v any) error {
	if s.full.Load() {
		return fmt.Errorf("storing %s: %w", key, cache.ErrNotWritable)
	}
	return s.Store.PutMeta(key, v)
}

func (s *notWritable) OpenBlob(sha string) (cache.BlobReader, error) {
	if want, _ := s.sha.Load().(string); want == sha {
		s.opens.Add(1)
	}
	return s.Store.OpenBlob(sha)
}

// warnings counts the records of a logger at Warn or above, and hands
// every record to next.
type warnings struct {
	slog.Handler
	n *atomic.Int64
}

func (w warnings) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		w.n.Add(1)
	}
	return w.Handler.Handle(ctx, r)
}

func (w warnings) WithAttrs(a []slog.Attr) slog.Handler { return warnings{w.Handler.WithAttrs(a), w.n} }
func (w warnings) WithGroup(g string) slog.Handler      { return warnings{w.Handler.WithGroup(g), w.n} }

// A record of an earlier release that cannot take its tree, the cache
// not writable, is served as ever: its package is not read again for its
// tree at every download, nor a warning logged for each.
func TestModuleRecordTreeOnACacheNotWritable(t *testing.T) {
	t.Parallel()
	var store *notWritable
	var warned atomic.Int64
	h := harness.New(t, harness.Options{
		Config: harness.Config{ScratchDir: t.TempDir(), Logger: slog.New(warnings{enginetest.Logger(t).Handler(), &warned})},
		Wrap:   func(s harness.Store) harness.Store { store = &notWritable{Store: s}; return store }})
	oneTarball(h, "0.1.0")
	v := enginetest.MustModuleVersion(t, "0.1.0")
	mods := h.Engine.Modules()
	pkg, _, err := openAll(mods, v)
	if err != nil {
		t.Fatal(err)
	}
	key := records.ModuleRecordKey(harness.TarballModule, v)
	var rec records.ModuleRecord
	h.Store.GetMeta(key, &rec)
	rec.Tree = "" // as an earlier release kept it
	if err := h.Store.PutMeta(key, &rec); err != nil {
		t.Fatal(err)
	}
	store.sha.Store(pkg.SHA256)
	store.full.Store(true)
	warned.Store(0)
	const downloads = 5
	for range downloads {
		if _, got, err := openAll(mods, v); err != nil || len(got) == 0 {
			t.Fatalf("download from a cache not writable: %v", err)
		}
	}
	if n := store.opens.Load(); n > downloads+1 {
		t.Errorf("the package was opened %d times for %d downloads: read again for its tree each time", n, downloads)
	}
	if n := warned.Load(); n > 0 {
		t.Errorf("%d warnings for %d downloads from a cache not writable", n, downloads)
	}
}

// An import whose package the cache holds already in other bytes, or
// that is refused for holding another tree, leaves no blob behind: the
// cache's size is what its records name.
func TestImportModuleInOtherBytesLeavesNoBlob(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{Config: harness.Config{ScratchDir: t.TempDir()}})
	loc := oneTarball(h, "0.1.0")
	ctx := context.Background()
	v := enginetest.MustModuleVersion(t, "0.1.0")
	mods := h.Engine.Modules()
	_, now, err := openAll(mods, v)
	if err != nil {
		t.Fatal(err)
	}
	other := otherBytes(t, now)
	if res, err := mods.ImportModule(ctx, modules.Imported{Module: harness.TarballModule, Version: "0.1.0", Location: loc,
		SHA256: sha256Hex(other), Open: opener(other)}); err != nil || !res.Present {
		t.Fatalf("import of the cached package in other bytes: %+v, %v", res, err)
	}
	if _, err := h.Store.StatBlob(sha256Hex(other)); err == nil {
		t.Error("the import of a package the cache holds left its other bytes in the cache")
	}
	changed := fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# two\n")})
	if _, err := mods.ImportModule(ctx, modules.Imported{Module: harness.TarballModule, Version: "0.1.0", Location: loc,
		SHA256: sha256Hex(changed), Open: opener(changed)}); !errors.Is(err, verify.ErrIntegrity) {
		t.Fatalf("an import of another tree: %v", err)
	}
	if _, err := h.Store.StatBlob(sha256Hex(changed)); err == nil {
		t.Error("the import refused left its package in the cache")
	}
}

// A Git module's record of an earlier release, its package evicted
// before it took its tree, is judged by its commit when the package is
// fetched again, when that commit is one this mirror resolved: the same
// commit is the same package, in whatever bytes. The commit of an
// imported record is the import's word, which nothing bound its files
// to: another package fetched at that commit is refused.
func TestModuleFetchedAgainAtTheCommitOfItsRecord(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{Config: harness.Config{ScratchDir: t.TempDir()}})
	o := h.Origin
	commit, err := o.AddGitRepo("vpc", map[string][]byte{"main.tf": []byte("# one\n")}, "v1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	o.AddModule("acme", "vpc", "aws", "1.0.0", "git::"+o.GitURL("vpc")+"?ref=v1.0.0")
	ctx := context.Background()
	v := enginetest.MustModuleVersion(t, "1.0.0")
	key := records.ModuleRecordKey(harness.Module, v)
	mods := h.Engine.Modules()
	pkg, err := mods.OpenModule(ctx, harness.Module, v)
	if err != nil {
		t.Fatal(err)
	}
	now, _ := io.ReadAll(pkg.Content())
	pkg.Close()
	if pkg.Record.Commit != commit {
		t.Fatalf("record's commit %q, want %q", pkg.Record.Commit, commit)
	}

	asFirstStored(t, h, harness.Module, "1.0.0", otherBytes(t, now), false)
	if pkg, err := mods.OpenModule(ctx, harness.Module, v); err != nil {
		t.Errorf("fetched again at the commit this mirror resolved: %v", err)
	} else {
		pkg.Close()
	}

	// Imported by an earlier release, naming the commit, with other files.
	lie := fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# not the commit's\n")})
	rec := asFirstStored(t, h, harness.Module, "1.0.0", lie, false)
	rec.Provenance = records.ProvenanceImported
	if err := h.Store.PutMeta(key, &rec); err != nil {
		t.Fatal(err)
	}
	if pkg, err := mods.OpenModule(ctx, harness.Module, v); !errors.Is(err, modules.ErrChanged) {
		if pkg != nil {
			pkg.Close()
		}
		t.Errorf("an imported record's package, other files at its commit fetched again: %v, want ErrChanged", err)
	}
	h.Store.GetMeta(key, &rec)
	if rec.SHA256 != sha256Hex(lie) {
		t.Errorf("the record names %s, want the package imported (%s)", rec.SHA256, sha256Hex(lie))
	}
}
