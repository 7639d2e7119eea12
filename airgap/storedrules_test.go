package airgap

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// TestExportsLeaveOutModulesRefusedToday: a sealed mirror's cache holds
// two module versions an earlier release kept, one whose package holds
// .GIT/config, one whose record's //SUBDIR climbs out with backslashes,
// and a good one. The bundle export and the OCI layout export carry the
// good one only, and report the two as failed.
func TestExportsLeaveOutModulesRefusedToday(t *testing.T) {
	store := enginetest.OpenStore(t, "", cache.Options{})
	engine, err := mirror.New(mirror.Config{AllowedOrigins: []string{enginetest.OriginHost}, Logger: enginetest.Logger(t),
		ScratchDir: t.TempDir(), Offline: true}, enginetest.OriginClient(t, enginetest.StartOrigin(t, fakeorigin.Options{})), store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		engine.Shutdown(ctx)
		store.Close()
	})
	keep := func(version string, entries []fakeorigin.TarEntry, subdir string) {
		pkg := fakeorigin.TarGzEntries(entries)
		sha, err := cachetest.PutBlob(store, pkg)
		if err != nil {
			t.Fatal(err)
		}
		loc := "https://src.test/tarball-" + version + ".tar.gz"
		rec := records.ModuleRecord{Schema: records.Schema, Module: tarballModule.String(), Version: version,
			Location: loc, Kind: modsource.KindArchive, Package: loc, SHA256: sha, Size: int64(len(pkg)), FetchedAt: time.Now().UTC()}
		if subdir != "" {
			rec.Location, rec.Subdir = loc+"//"+subdir, subdir
		}
		if err := store.PutMeta(records.ModuleRecordKey(tarballModule, enginetest.MustModuleVersion(t, version)), &rec); err != nil {
			t.Fatal(err)
		}
	}
	main := fakeorigin.TarEntry{Name: "x/main.tf", Body: "# x\n"}
	keep("1.0.0", []fakeorigin.TarEntry{main, {Name: ".GIT/config", Body: "[core]\n"}}, "x")
	keep("2.0.0", []fakeorigin.TarEntry{main}, `..\..\x`)
	keep("3.0.0", []fakeorigin.TarEntry{main}, "x")
	ctx := context.Background()

	out := filepath.Join(t.TempDir(), "out")
	var reports []string
	sum, err := Export(ctx, engine, servedBy(t, engine, nil), nil, Selection{}, out, newKey(t, "exporter"), func(s string) { reports = append(reports, s) })
	if err != nil {
		t.Fatal(err)
	}
	if sum.Modules != 1 || sum.Failed != 2 {
		t.Errorf("bundle export: %+v, %q; want 1 module, 2 failed", sum, reports)
	}
	dir := filepath.Join(out, filepath.FromSlash("modules/registry.terraform.io/acme/tarball/aws"))
	for _, v := range []string{"1.0.0", "2.0.0"} {
		if _, err := os.Stat(filepath.Join(dir, v+".tar.gz")); err == nil {
			t.Errorf("the bundle carries %s", v)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "3.0.0.tar.gz")); err != nil {
		t.Errorf("the bundle lacks 3.0.0: %v", err)
	}
	if !strings.Contains(strings.Join(reports, "\n"), "refused by the rules in force") {
		t.Errorf("reports %q do not say why", reports)
	}

	side, names := ociLayoutParts(t, engine)
	reports = nil
	lsum, err := ExportOCILayout(ctx, engine, servedBy(t, engine, side), names, Selection{}, filepath.Join(t.TempDir(), "layout"), func(s string) { reports = append(reports, s) })
	if err != nil {
		t.Fatal(err)
	}
	if lsum.Tags != 1 || lsum.Failed != 2 {
		t.Errorf("OCI layout export: %+v, %q; want 1 tag, 2 failed", lsum, reports)
	}
}
