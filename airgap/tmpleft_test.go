package airgap

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// An export killed while it wrote leaves its temporary files (.tmp-…
// beside the files it was writing). The next export into the directory
// removes those of an export long gone: they are neither carried nor
// reported as left out of the signed manifest on every export after. A
// file of the operator's that only looks like one is left, and reported
// as before; so is, where there are no locks (exportLocks), a temporary
// file written lately (that of an export of another process writing
// into the directory, which the lock refuses where there are locks).
func TestExportRemovesAnInterruptedExportsTemporaryFiles(t *testing.T) {
	engine, p, out, key := exportedNetAndTarball(t)
	providerDir := filepath.Join(out, p.Hostname.ForDisplay(), p.Namespace, p.Type)
	old := time.Now().Add(-2 * time.Hour)
	write := func(path string, mtime time.Time) string {
		t.Helper()
		if err := os.WriteFile(path, []byte("half an archive"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return path
	}
	stale := []string{
		write(filepath.Join(providerDir, ".tmp-ABCDEFGHIJKLMNOPQRSTUVWXYZ"), old),
		write(filepath.Join(out, ".tmp-234567ABCDEFGHIJKLMNOPQRST"), old),
	}
	kept := []string{write(filepath.Join(providerDir, ".tmp-notes.txt"), old)}
	fresh := write(filepath.Join(providerDir, ".tmp-QRSTUVWXYZ234567ABCDEFGHIJ"), time.Now())
	if exportLocks {
		stale = append(stale, fresh)
	} else {
		kept = append(kept, fresh)
	}

	var reports []string
	sum, err := Export(context.Background(), engine, servedBy(t, engine, nil), nil, Selection{}, out, key, func(s string) { reports = append(reports, s) })
	if err != nil || sum.Failed != 0 {
		t.Fatalf("export after an interrupted one: %+v %v %q", sum, err, reports)
	}
	for _, path := range stale {
		if _, err := os.Lstat(path); !os.IsNotExist(err) {
			t.Errorf("%s, an interrupted export's temporary file, is still there (%v)", path, err)
		}
	}
	for _, path := range kept {
		if _, err := os.Lstat(path); err != nil {
			t.Errorf("%s was removed: %v", path, err)
		}
	}
	if sum.Unlisted != len(kept) {
		t.Errorf("%d files reported left out of the manifest, want the %d kept: %q", sum.Unlisted, len(kept), reports)
	}
	for _, r := range reports {
		for _, path := range stale {
			if strings.Contains(r, path) && !strings.Contains(r, "removed") {
				t.Errorf("report %q about a temporary file it removed", r)
			}
		}
	}
}

// The same for an OCI layout export: an interrupted one's temporary file
// in a layout's blobs is removed by the next export into the directory.
func TestOCILayoutExportRemovesAnInterruptedExportsTemporaryFiles(t *testing.T) {
	engine, _ := cachedNetAndTarball(t)
	ctx := context.Background()
	side, names := ociLayoutParts(t, engine)
	out := filepath.Join(t.TempDir(), "layout")
	if sum, err := ExportOCILayout(ctx, engine, servedBy(t, engine, side), names, Selection{}, out, func(string) {}); err != nil || sum.Tags != 2 {
		t.Fatalf("first export: %+v %v", sum, err)
	}
	var blobs string
	filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == "sha256" && blobs == "" {
			blobs = path
		}
		return nil
	})
	if blobs == "" {
		t.Fatal("the layout has no blobs/sha256 directory")
	}
	stale := filepath.Join(blobs, ".tmp-ABCDEFGHIJKLMNOPQRSTUVWXYZ")
	if err := os.WriteFile(stale, []byte("half a blob"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	var reports []string
	if _, err := ExportOCILayout(ctx, engine, servedBy(t, engine, side), names, Selection{}, out, func(s string) { reports = append(reports, s) }); err != nil {
		t.Fatalf("export after an interrupted one: %v", err)
	}
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Errorf("%s, an interrupted export's temporary file, is still there (%v)", stale, err)
	}
	if len(reports) != 1 || !strings.Contains(reports[0], stale) || !strings.Contains(reports[0], "removed") {
		t.Errorf("reports %q, want one saying %s was removed", reports, stale)
	}
}

// An export into a tar file killed while it wrote leaves, beside the tar
// file's name, its working directory (every archive exported so far) and
// its unfinished tar file. The next export into a tar file there removes
// those of an export long gone, and says so; the working directory of
// another process's export still writing (its lock held, and, where
// there are no locks, written into lately, however old the directory
// itself) with its tar file, and a file of the operator's that only
// looks like one, stay.
func TestTarExportRemovesAnInterruptedExportsLeftovers(t *testing.T) {
	engine, _ := cachedNetAndTarball(t)
	parent := t.TempDir()
	old := time.Now().Add(-2 * time.Hour)
	age := func(path string, mtime time.Time) string {
		t.Helper()
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return path
	}
	file := func(path string, mtime time.Time) string {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("half an archive"), 0o600); err != nil {
			t.Fatal(err)
		}
		return age(path, mtime)
	}
	// A killed export's working directory: everything in it old.
	staleDir := filepath.Join(parent, ".tfmirror-export-ABCDEFGHIJKLMNOPQRSTUVWXYZ")
	file(filepath.Join(staleDir, "registry.terraform.io", "hashicorp", "null", ".tmp-ABCDEFGHIJKLMNOPQRSTUVWXYZ"), old)
	for _, d := range []string{"registry.terraform.io/hashicorp/null", "registry.terraform.io/hashicorp", "registry.terraform.io", ""} {
		age(filepath.Join(staleDir, d), old)
	}
	// One of an earlier release, named by os.MkdirTemp.
	staleOlder := filepath.Join(parent, ".tfmirror-export-1234567890")
	file(filepath.Join(staleOlder, "index.json"), old)
	age(staleOlder, old)
	stale := []string{staleDir, staleOlder,
		file(filepath.Join(parent, ".tfmirror-export-234567ABCDEFGHIJKLMNOPQRST.tar"), old),
		file(filepath.Join(parent, ".tfmirror-export-987654321.tar"), old)}
	// Another process's export, writing deep in a directory made long ago.
	live := filepath.Join(parent, ".tfmirror-export-QRSTUVWXYZ234567ABCDEFGHIJ")
	file(filepath.Join(live, "registry.terraform.io", "x", "y", "archive.zip"), time.Now())
	age(filepath.Join(live, "registry.terraform.io"), old)
	age(live, old)
	lock, err := os.Open(live)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := lockExport(lock); err != nil {
		t.Fatal(err)
	}
	kept := []string{live,
		file(filepath.Join(parent, ".tfmirror-export-notes.txt"), old),
		file(filepath.Join(parent, ".tfmirror-export-QRSTUVWXYZ234567ABCDEFGHIJ.tar"), time.Now())}

	var reports []string
	out := filepath.Join(parent, "bundle.tar")
	if sum, err := Export(context.Background(), engine, servedBy(t, engine, nil), nil, Selection{}, out, newKey(t, "exporter"), func(s string) { reports = append(reports, s) }); err != nil || sum.Failed != 0 {
		t.Fatalf("export after an interrupted one: %+v %v %q", sum, err, reports)
	}
	checkRemoved(t, stale, reports)
	for _, path := range kept {
		if _, err := os.Lstat(path); err != nil {
			t.Errorf("%s was removed: %v", path, err)
		}
	}
	entries, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(kept)+1 {
		t.Errorf("beside the export: %v, want the %d kept and bundle.tar", entries, len(kept))
	}
}

// checkRemoved fails t for each path of stale still there, or that no
// line of reports says was removed.
func checkRemoved(t *testing.T, stale, reports []string) {
	t.Helper()
	for _, path := range stale {
		if _, err := os.Lstat(path); !os.IsNotExist(err) {
			t.Errorf("%s, left by a killed export, is still there (%v)", path, err)
		}
		if !slices.ContainsFunc(reports, func(r string) bool { return strings.Contains(r, path) && strings.Contains(r, "removed") }) {
			t.Errorf("no report says %s was removed: %q", path, reports)
		}
	}
}
