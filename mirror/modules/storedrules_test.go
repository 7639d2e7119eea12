package modules_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
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
			_, err = h.Engine.Modules().OpenModule(ctx, harness.Module, v)
			refused("package", err)
			_, err = h.Engine.Modules().Zips().OpenModuleZip(ctx, harness.Module, v)
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
