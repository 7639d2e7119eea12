package modsource

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// PackDir packs a directory of module files as Fetch packs a fetched
// tree (.git left out), within the limits; a link out of it is refused.
func TestPackDir(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{"main.tf": "# m\n", "sub/x.tf": "# x\n", ".git/HEAD": "ref\n"} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var a, b bytes.Buffer
	res, err := PackDir(context.Background(), dir, t.TempDir(), &a, Limits{MaxEntries: 10})
	if err != nil || res.Files != 2 {
		t.Fatalf("PackDir: %+v, %v", res, err)
	}
	if _, err := PackDir(context.Background(), dir, t.TempDir(), &b, Limits{}); err != nil || !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Errorf("packing twice gives other bytes (%v)", err)
	}
	var names []string
	gz, _ := gzip.NewReader(&a)
	tr := tar.NewReader(gz)
	for h, err := tr.Next(); err == nil; h, err = tr.Next() {
		names = append(names, h.Name)
	}
	if got := strings.Join(names, " "); got != "main.tf sub/ sub/x.tf" {
		t.Errorf("the package holds %s", got)
	}
	if _, err := PackDir(context.Background(), dir, t.TempDir(), &b, Limits{MaxEntries: 2}); !errors.As(err, new(*LimitError)) {
		t.Errorf("over the entry limit: %v", err)
	}
	if err := os.Symlink("../../etc/passwd", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := PackDir(context.Background(), dir, t.TempDir(), &b, Limits{}); err == nil || !strings.Contains(err.Error(), "points outside") {
		t.Errorf("a link out of the module: %v", err)
	}
}

// A link whose ".." climb out of the package from its top is refused,
// however a rooted path would clean them away.
func TestUnpackRefusesLinkOutOfTop(t *testing.T) {
	for _, target := range []string{"../../etc/passwd", "..", "sub/../../x"} {
		var buf bytes.Buffer
		gz := gzip.NewWriter(&buf)
		tw := tar.NewWriter(gz)
		tw.WriteHeader(&tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: target})
		tw.Close()
		gz.Close()
		if err := Unpack(context.Background(), &buf, t.TempDir(), Limits{}); err == nil || !strings.Contains(err.Error(), "points outside") {
			t.Errorf("link to %q: %v", target, err)
		}
	}
}

// A directory of more entries than the limit allows is refused without
// being read whole first: its entries are charged as they are read, a
// batch at a time, so what packing it takes in memory stays that of a
// batch however many entries it holds. Entries named as .git, which a
// package leaves out and no limit charges, are refused past a bound.
func TestPackRootListingBounded(t *testing.T) {
	const entries = 30000
	dir := t.TempDir()
	for i := range entries {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d.tf", i)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	scratchDir := t.TempDir()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = PackRoot(t.Context(), root, scratchDir, io.Discard, Limits{MaxEntries: 10})
	runtime.ReadMemStats(&after)
	if !errors.As(err, new(*LimitError)) {
		t.Fatalf("a directory of %d entries, 10 allowed: %v, want a *LimitError", entries, err)
	}
	// Read whole, the listing alone takes over 2 MiB (some 80 bytes an
	// entry); a batch, some 20 KiB.
	if took := after.TotalAlloc - before.TotalAlloc; took > 1<<20 {
		t.Errorf("refusing a directory of %d entries took %d bytes: it was read whole", entries, took)
	}

	dotGit := t.TempDir()
	if err := os.WriteFile(filepath.Join(dotGit, "main.tf"), []byte("# m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range maxSkippedDotGit + 1 {
		if err := os.WriteFile(filepath.Join(dotGit, ".git"+strings.Repeat(".", i)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, err = PackDir(t.Context(), dotGit, scratchDir, io.Discard, Limits{})
	if err == nil || !strings.Contains(err.Error(), ".git") {
		t.Errorf("a directory of %d entries named as .git: %v, want a refusal", maxSkippedDotGit+1, err)
	}
	if err := os.Remove(filepath.Join(dotGit, ".git")); err != nil {
		t.Fatal(err)
	}
	if res, err := PackDir(t.Context(), dotGit, scratchDir, io.Discard, Limits{}); err != nil || res.Files != 1 {
		t.Errorf("a directory of %d entries named as .git: %+v, %v; want them left out", maxSkippedDotGit, res, err)
	}
}
