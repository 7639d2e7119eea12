package airgap

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
	"github.com/tfmirror/tfmirror/v2/internal/safetree"
)

// nest makes depth directories named "d", one in the other, under top,
// with the file name at the bottom, every one of them last written at
// mtime; it returns the file's path.
func nest(t *testing.T, top string, depth int, name string, mtime time.Time) string {
	t.Helper()
	bottom := filepath.Join(top, strings.Repeat("d"+string(filepath.Separator), depth))
	if err := os.MkdirAll(bottom, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(bottom, name)
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for p := file; len(p) >= len(top); p = filepath.Dir(p) {
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	return file
}

// TestExportRefusesAnOutTooDeep: an export directory holding directories
// nested deeper than any export writes is refused, naming where, before
// the export reads what they hold (an interrupted export's temporary
// file at the bottom is neither removed nor listed); as deep as
// safetree.MaxDepth is taken, and what it holds reported as left out of
// the manifest as any other file of the operator's.
func TestExportRefusesAnOutTooDeep(t *testing.T) {
	engine, _, out, key := exportedNetAndTarball(t)
	old := time.Now().Add(-2 * time.Hour)
	temp := ".tmp-ABCDEFGHIJKLMNOPQRSTUVWXYZ"

	deep := filepath.Join(out, "deep")
	bottom := nest(t, deep, safetree.MaxDepth, temp, old)
	var reports []string
	_, err := Export(context.Background(), engine, servedBy(t, engine, nil), nil, Selection{}, out, key, func(s string) { reports = append(reports, s) })
	if err == nil || !strings.Contains(err.Error(), "nested more than 64 deep") || !strings.Contains(err.Error(), deep) {
		t.Fatalf("export into a directory %d deep: %v, want refused naming it", safetree.MaxDepth+1, err)
	}
	if _, err := os.Lstat(bottom); err != nil {
		t.Errorf("the file at the bottom of the tree too deep: %v, want left", err)
	}
	for _, r := range reports {
		if strings.Contains(r, "/d/d/d/") {
			t.Errorf("reported %q, from beneath the tree too deep", r)
		}
	}

	if err := os.RemoveAll(deep); err != nil {
		t.Fatal(err)
	}
	kept := nest(t, deep, safetree.MaxDepth-1, "notes.txt", old)
	sum, err := Export(context.Background(), engine, servedBy(t, engine, nil), nil, Selection{}, out, key, func(string) {})
	if err != nil || sum.Failed != 0 || sum.Unlisted != 1 {
		t.Fatalf("export with a directory %d deep in it: %+v %v, want done, one file left out of the manifest", safetree.MaxDepth, sum, err)
	}
	if _, err := os.Lstat(kept); err != nil {
		t.Errorf("the operator's file %d deep: %v", safetree.MaxDepth, err)
	}
}

// TestStaleTarTempTooDeepLeft: what an earlier release's export into a
// tar file left beside it, long unwritten, is removed; the same holding
// directories nested deeper than safetree.MaxDepth is not looked into,
// and is left where it is.
func TestStaleTarTempTooDeepLeft(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-2 * time.Hour)
	shallow := filepath.Join(dir, tarTempPrefix+"123")
	nest(t, shallow, 8, "half.zip", old)
	deep := filepath.Join(dir, tarTempPrefix+"456")
	nest(t, deep, safetree.MaxDepth+1, "half.zip", old)

	var reports []string
	if err := removeStaleTarTemps(dir, func(s string) { reports = append(reports, s) }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(shallow); !os.IsNotExist(err) {
		t.Errorf("%s, an interrupted export's working directory: %v, want removed", shallow, err)
	}
	if _, err := os.Lstat(deep); err != nil {
		t.Errorf("%s, nested too deep to tell: %v, want left", deep, err)
	}
	if len(reports) != 1 || !strings.Contains(reports[0], shallow) {
		t.Errorf("reports %q, want the one removed", reports)
	}
}

// TestOutWalkEntriesBounded: the walk of an export directory stops past
// its bound of entries (one directory holding more than it, here),
// naming the export directory, having handed on no more than that bound.
func TestOutWalkEntriesBounded(t *testing.T) {
	out := t.TempDir()
	big := filepath.Join(out, "big")
	if err := os.Mkdir(big, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 3 * inputfile.WalkBatch {
		if err := os.WriteFile(filepath.Join(big, fmt.Sprintf("f%04d", i)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dir := outFor(t, out)
	count := func() (int, error) {
		n := 0
		err := dir.walk(func(string, fs.DirEntry) error { n++; return nil })
		return n, err
	}
	if n, err := count(); err != nil || n != 3*inputfile.WalkBatch+1 {
		t.Fatalf("walk within the bound: %d entries, %v; want %d", n, err, 3*inputfile.WalkBatch+1)
	}
	dir.maxEntries = inputfile.WalkBatch
	n, err := count()
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d entries in the export directory %s", inputfile.WalkBatch, out)) {
		t.Fatalf("walk past the bound: %v, want refused naming the export directory", err)
	}
	if n > dir.maxEntries {
		t.Errorf("%d entries handed on, more than the bound of %d", n, dir.maxEntries)
	}
}
