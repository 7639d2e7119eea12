package modules_test

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// storeEarlier stores pkg as a blob and rec, completed with its sha256,
// under the key of version 1.1.0, as a release before today's rules wrote
// them (straight into the cache).
func storeEarlier(t *testing.T, h *harness.Harness, pkg []byte, rec records.ModuleRecord) records.ModuleRecord {
	t.Helper()
	sum := sha256.Sum256(pkg)
	sha := hex.EncodeToString(sum[:])
	w, err := h.Store.NewBlobWriter(sha)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Write(pkg); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(""); err != nil {
		t.Fatal(err)
	}
	rec.Schema, rec.Module, rec.Version = records.Schema, harness.Module.String(), "1.1.0"
	rec.SHA256, rec.Size, rec.FetchedAt = sha, int64(len(pkg)), time.Now().UTC()
	if err := h.Store.PutMeta(storedKey(t), &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

func storedKey(t *testing.T) string {
	return records.ModuleRecordKey(harness.Module, enginetest.MustModuleVersion(t, "1.1.0"))
}

// rawRecord reads the stored record under key without decoding it as a
// module record (whose decoding holds it to today's rules).
func rawRecord(t *testing.T, h *harness.Harness) map[string]any {
	t.Helper()
	var raw map[string]any
	if _, err := h.Store.GetMeta(storedKey(t), &raw); err != nil {
		t.Fatal(err)
	}
	return raw
}

// earlierSubdirRecord is a record an earlier release kept of a location
// whose //SUBDIR climbs out of the package with backslashes, as a client
// on Windows reads it: the subdirectory as it was then cleaned (with "/"
// as the only separator), which the module registry door handed on.
func earlierSubdirRecord(o *fakeorigin.Origin) records.ModuleRecord {
	pkgURL := o.TarballURL("vpc-1.1.0.tar.gz")
	return records.ModuleRecord{Location: pkgURL + `//..\..\x`, Kind: modsource.KindArchive, Package: pkgURL, Subdir: `..\..\x`}
}

// A stored record whose //SUBDIR today's parser cleans otherwise is not
// served: with its origin reachable, its location is asked for again and
// the record made again from the answer, and its package fetched again.
func TestStoredRecordRefusedIsMadeAgain(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{})
	o := h.Origin
	pkg := fakeorigin.TarGz(map[string][]byte{"x/main.tf": []byte("# x\n")})
	o.AddTarball("vpc-1.1.0.tar.gz", pkg)
	o.AddModule("acme", "vpc", "aws", "1.1.0", o.TarballURL("vpc-1.1.0.tar.gz")+"//x")
	storeEarlier(t, h, fakeorigin.TarGz(map[string][]byte{"x/main.tf": []byte("# earlier\n")}), earlierSubdirRecord(o))

	v := enginetest.MustModuleVersion(t, "1.1.0")
	rec, err := h.Engine.Modules().ModuleLocation(context.Background(), harness.Module, v)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Subdir != "x" || rec.SHA256 != "" {
		t.Fatalf("record served: subdir %q, sha256 %q; want the origin's again (x, not yet fetched)", rec.Subdir, rec.SHA256)
	}
	got, body, err := h.ReadModule("1.1.0")
	if err != nil {
		t.Fatal(err)
	}
	if got.Record.Subdir != "x" || string(body) == "" || got.Source == records.Hit {
		t.Errorf("package: subdir %q, source %v; want one fetched again", got.Record.Subdir, got.Source)
	}
	if raw := rawRecord(t, h); raw["subdir"] != "x" {
		t.Errorf("stored record's subdir %v, want the one made again", raw["subdir"])
	}
}

// Where the record cannot be made again (a sealed mirror; an imported
// version), it is refused on every way it is served (the location, the
// package, the zip), with an integrity error naming the rule, and kept.
func TestStoredRecordRefusedKeptWhenNotFetchable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		offline    bool
		provenance records.Provenance
	}{
		{"sealed", true, records.ProvenanceOrigin},
		{"imported", false, records.ProvenanceImported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := harness.New(t, harness.Options{Config: harness.Config{Offline: tc.offline}})
			o := h.Origin
			rec := earlierSubdirRecord(o)
			rec.Provenance = tc.provenance
			o.AddModule("acme", "vpc", "aws", "1.1.0", rec.Location)
			storeEarlier(t, h, fakeorigin.TarGz(map[string][]byte{"x/main.tf": []byte("# earlier\n")}), rec)
			o.ResetHits()
			v := enginetest.MustModuleVersion(t, "1.1.0")
			ctx := context.Background()
			refused := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, records.ErrModuleRecordRefused) || !errors.Is(err, verify.ErrIntegrity) {
					t.Errorf("%s: %v, want the stored record refused", what, err)
				}
			}
			_, err := h.Engine.Modules().ModuleLocation(ctx, harness.Module, v)
			refused("location", err)
			pkg, err := h.Engine.Modules().OpenModule(ctx, harness.Module, v)
			if err == nil {
				pkg.Close() // served: the check below fails
			}
			refused("package", err)
			z, err := h.Engine.Modules().Zips().OpenModuleZip(ctx, harness.Module, v)
			if err == nil {
				z.Close()
			}
			refused("zip", err)
			var listed []modules.Cached
			if err := h.Engine.Modules().ListCachedModules(func(cm modules.Cached) error { listed = append(listed, cm); return nil }); err != nil {
				t.Fatal(err)
			}
			if len(listed) != 1 || listed[0].Cached || !errors.Is(listed[0].Refused, records.ErrModuleRecordRefused) {
				t.Errorf("listed %+v; want the version listed as refused, not cached (the exports carry cached ones)", listed)
			}
			if raw := rawRecord(t, h); raw["subdir"] != `..\..\x` {
				t.Errorf("stored record's subdir %v, want it kept", raw["subdir"])
			}
			if n := o.TotalHits(); tc.offline && n != 0 {
				t.Errorf("%d origin requests of a sealed mirror", n)
			}
		})
	}
}

// The rule is the decoding's: a record decoded anywhere is held to it.
func TestModuleRecordDecodingHoldsToTodaysRules(t *testing.T) {
	t.Parallel()
	o := &fakeorigin.Origin{URL: "https://h.test"}
	for _, tc := range []struct {
		name string
		rec  records.ModuleRecord
		ok   bool
	}{
		{"today's", records.ModuleRecord{Location: "https://h.test/m.tar.gz//x", Kind: modsource.KindArchive, Subdir: "x"}, true},
		{"local module", records.ModuleRecord{Provenance: records.ProvenanceUnsigned, Subdir: "modules/vpc"}, true},
		{"climbing with backslashes", earlierSubdirRecord(o), false},
		{"local module climbing", records.ModuleRecord{Provenance: records.ProvenanceUnsigned, Subdir: `..\x`}, false},
		{"kind changed", records.ModuleRecord{Location: "https://h.test/m.tar.gz", Kind: modsource.KindGit}, false},
		{"location refused today", records.ModuleRecord{Location: "s3::https://h.test/m.tar.gz", Kind: modsource.KindArchive}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.rec.Schema, tc.rec.Module, tc.rec.Version = records.Schema, "h.test/a/b/c", "1.0.0"
			raw, err := json.Marshal(tc.rec)
			if err != nil {
				t.Fatal(err)
			}
			var got records.ModuleRecord
			err = json.Unmarshal(raw, &got)
			if tc.ok != (err == nil) {
				t.Fatalf("decoding: %v", err)
			}
			if err != nil && (!errors.Is(err, records.ErrModuleRecordRefused) || got.Location != tc.rec.Location || got.Subdir != tc.rec.Subdir) {
				t.Errorf("refused record: %v, decoded %+v; want it decoded all the same", err, got)
			}
		})
	}
}

// storeBlob stores data as a blob and returns its sha256.
func storeBlob(t *testing.T, h *harness.Harness, data []byte) string {
	t.Helper()
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	w, err := h.Store.NewBlobWriter(sha)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(""); err != nil {
		t.Fatal(err)
	}
	return sha
}

// earlierDotGIT stores, as a release before .git was left out in every
// spelling, the package of version 1.1.0 holding .GIT/config (which a
// client on macOS or Windows unpacks as a Git configuration), and the
// zip made of it, with their records. It returns the record and the
// zip's sha256.
func earlierDotGIT(t *testing.T, h *harness.Harness, provenance records.Provenance) (records.ModuleRecord, string) {
	t.Helper()
	o := h.Origin
	files := map[string][]byte{"main.tf": []byte("# vpc\n"), ".GIT/config": []byte("[core]\n\tfsmonitor = touch /tmp/pwned\n")}
	o.AddTarball("vpc-1.1.0.tar.gz", fakeorigin.TarGz(files))
	loc := o.TarballURL("vpc-1.1.0.tar.gz")
	o.AddModule("acme", "vpc", "aws", "1.1.0", loc)
	rec := storeEarlier(t, h, fakeorigin.TarGz(files),
		records.ModuleRecord{Location: loc, Kind: modsource.KindArchive, Package: loc, Provenance: provenance})
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	for _, name := range []string{".GIT/config", "main.tf"} {
		f, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(files[name])
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	zsha := storeBlob(t, h, zb.Bytes())
	zrec := records.ModuleZipRecord{Schema: records.Schema, Module: rec.Module, Version: rec.Version, Package: rec.SHA256, SHA256: zsha, Size: int64(zb.Len())}
	if err := h.Store.PutMeta(records.ModuleZipKey(harness.Module, enginetest.MustModuleVersion(t, "1.1.0")), &zrec); err != nil {
		t.Fatal(err)
	}
	return rec, zsha
}

// holdsDotGIT says the tar.gz or zip in data names .GIT.
func holdsDotGIT(t *testing.T, data []byte) bool {
	t.Helper()
	return bytes.Contains(data, []byte(".GIT/")) || bytes.Contains(gunzip(t, data), []byte(".GIT/"))
}

func gunzip(t *testing.T, data []byte) []byte {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil
	}
	out, _ := io.ReadAll(zr)
	return out
}

// A stored package that today's rules refuse (.GIT/config) is not served,
// nor the zip made of it: with its origin reachable, it is fetched again
// (leaving .GIT out) and its record and its zip's made again. (OpenModule's
// path for a package today's rules refuse: refetchRefused.)
func TestStoredPackageRefusedIsFetchedAgain(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{})
	rec, zsha := earlierDotGIT(t, h, records.ProvenanceOrigin)
	ctx := context.Background()
	v := enginetest.MustModuleVersion(t, "1.1.0")

	z, err := h.Engine.Modules().Zips().OpenModuleZip(ctx, harness.Module, v)
	if err != nil {
		t.Fatal(err)
	}
	zbody, err := io.ReadAll(z.Content())
	z.Close()
	if err != nil {
		t.Fatal(err)
	}
	if z.Record.SHA256 == zsha || holdsDotGIT(t, zbody) {
		t.Errorf("zip %s served; want one made again without .GIT", z.Record.SHA256)
	}
	got, body, err := h.ReadModule("1.1.0")
	if err != nil {
		t.Fatal(err)
	}
	if got.SHA256 == rec.SHA256 || holdsDotGIT(t, body) || !bytes.Contains(gunzip(t, body), []byte("main.tf")) {
		t.Errorf("package %s served; want the one fetched again, without .GIT", got.SHA256)
	}
	if raw := rawRecord(t, h); raw["sha256"] != got.SHA256 {
		t.Errorf("stored record's sha256 %v, want %s", raw["sha256"], got.SHA256)
	}
	if z.Record.Package != got.SHA256 {
		t.Errorf("zip made of package %s, want %s", z.Record.Package, got.SHA256)
	}
}

// Where the package cannot be fetched again (a sealed mirror; an imported
// version), the package and its zip are refused with an integrity error,
// and kept (refetchRefused).
func TestStoredPackageRefusedKeptWhenNotFetchable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		offline    bool
		provenance records.Provenance
	}{
		{"sealed", true, records.ProvenanceOrigin},
		{"imported", false, records.ProvenanceImported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := harness.New(t, harness.Options{Config: harness.Config{Offline: tc.offline}})
			rec, zsha := earlierDotGIT(t, h, tc.provenance)
			h.Origin.ResetHits()
			ctx := context.Background()
			v := enginetest.MustModuleVersion(t, "1.1.0")
			refused := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, modules.ErrPackageRefused) || !errors.Is(err, verify.ErrIntegrity) {
					t.Errorf("%s: %v, want the stored package refused", what, err)
				}
			}
			pkg, err := h.Engine.Modules().OpenModule(ctx, harness.Module, v)
			if err == nil {
				pkg.Close() // served: the check below fails
			}
			refused("package", err)
			z, err := h.Engine.Modules().Zips().OpenModuleZip(ctx, harness.Module, v)
			if err == nil {
				z.Close()
			}
			refused("zip", err)
			_, err = h.Engine.Modules().Zips().ModuleManifest(ctx, harness.Module, v)
			refused("manifest", err)
			if raw := rawRecord(t, h); raw["sha256"] != rec.SHA256 {
				t.Errorf("stored record's sha256 %v, want it kept", raw["sha256"])
			}
			for _, sha := range []string{rec.SHA256, zsha} {
				if _, err := h.Store.StatBlob(sha); err != nil {
					t.Errorf("blob %s: %v, want it kept", sha, err)
				}
			}
			if n := h.Origin.TotalHits(); tc.offline && n != 0 {
				t.Errorf("%d origin requests of a sealed mirror", n)
			}
		})
	}
}

// A record or a package that today's rules refuse, read from the shared
// store (another replica of an earlier release put it there), is not
// served either: a replica with an empty cache, its origin reachable,
// makes the version again from the origin (past the shared store's
// copy, which it replaces); a sealed replica refuses it.
func TestSharedRecordsRefusedToday(t *testing.T) {
	t.Parallel()
	for _, sealed := range []bool{false, true} {
		t.Run(map[bool]string{false: "online", true: "sealed"}[sealed], func(t *testing.T) {
			t.Parallel()
			tier := harness.NewMemTier()
			old := harness.New(t, harness.Options{})
			rec, _ := earlierDotGIT(t, old, records.ProvenanceOrigin)
			pkg, err := old.Store.OpenBlob(rec.SHA256)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(pkg)
			pkg.Close()
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := tier.PutArchive(ctx, rec.SHA256, bytes.NewReader(body), int64(len(body))); err != nil {
				t.Fatal(err)
			}
			if err := tier.PutMeta(ctx, storedKey(t), &rec); err != nil {
				t.Fatal(err)
			}
			h := &harness.Harness{T: t, Origin: old.Origin}
			h.Start(harness.Options{Config: harness.Config{Shared: tier, Offline: sealed}})
			got, b, err := h.ReadModule("1.1.0")
			if sealed {
				if !errors.Is(err, modules.ErrPackageRefused) {
					t.Errorf("sealed: %v, want the shared store's package refused", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.SHA256 == rec.SHA256 || holdsDotGIT(t, b) {
				t.Errorf("served %s; want the package fetched again, without .GIT", got.SHA256)
			}
			h.WaitIdle()
			var shared records.ModuleRecord
			if err := json.Unmarshal(tier.Meta(storedKey(t)), &shared); err != nil || shared.SHA256 != got.SHA256 {
				t.Errorf("the shared store's record: %+v, %v; want the one made again", shared, err)
			}
		})
	}
}

// A sealed mirror's record that today's rules refuse, kept, is replaced
// by an import of the version (an export of a mirror of today's, whose
// location names a subdirectory within the package): the version is
// served again, from the imported record and package.
func TestImportReplacesRefusedRecord(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{Config: harness.Config{Offline: true}})
	rec := earlierSubdirRecord(h.Origin)
	pkg := fakeorigin.TarGz(map[string][]byte{"x/main.tf": []byte("# x\n")})
	storeEarlier(t, h, pkg, rec)
	ctx := context.Background()
	v := enginetest.MustModuleVersion(t, "1.1.0")
	if _, err := h.Engine.Modules().ModuleLocation(ctx, harness.Module, v); !errors.Is(err, records.ErrModuleRecordRefused) {
		t.Fatalf("before the import: %v, want the record refused", err)
	}
	sum := sha256.Sum256(pkg)
	if _, err := h.Engine.Modules().ImportModule(ctx, modules.Imported{Module: harness.Module, Version: "1.1.0",
		Location: rec.Package + "//x", SHA256: hex.EncodeToString(sum[:]), Open: opener(pkg)}); err != nil {
		t.Fatal(err)
	}
	got, err := h.Engine.Modules().ModuleLocation(ctx, harness.Module, v)
	if err != nil || got.Subdir != "x" || got.Provenance != records.ProvenanceImported {
		t.Fatalf("after the import: %+v, %v; want the imported record, subdirectory x", got, err)
	}
	if _, _, err := h.ReadModule("1.1.0"); err != nil {
		t.Errorf("the imported package: %v", err)
	}
}

// A location whose //SUBDIR leads outside of its package is refused, as
// the clients refuse it ("subdirectory path ... leads outside of the
// module package"), not cleaned into one within it: nothing is fetched
// and no record is kept.
func TestLocationLeadingOutsideThePackageRefused(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{})
	o := h.Origin
	o.AddTarball("vpc-1.1.0.tar.gz", fakeorigin.TarGz(map[string][]byte{"x/main.tf": []byte("# x\n")}))
	o.AddModule("acme", "vpc", "aws", "1.1.0", o.TarballURL("vpc-1.1.0.tar.gz")+"//modules/../../x")
	v := enginetest.MustModuleVersion(t, "1.1.0")
	rec, err := h.Engine.Modules().ModuleLocation(context.Background(), harness.Module, v)
	if !errors.Is(err, modsource.ErrUnsupported) || !strings.Contains(fmt.Sprint(err), "leads outside of the module package") {
		t.Fatalf("ModuleLocation = %+v, %v; want the location refused as leading outside of the package", rec, err)
	}
	if got := o.Hits(fakeorigin.Tarball); got != 0 {
		t.Errorf("the package was fetched %d times", got)
	}
	var kept records.ModuleRecord
	if _, err := h.Store.GetMeta(storedKey(t), &kept); err == nil {
		t.Errorf("a record was kept for the refused location: %+v", kept)
	}
}
