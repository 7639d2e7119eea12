package modsource

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// recompress reads a package tar.gz and writes its tar again through
// gzip at level: the same tree in other bytes, as another Go release's
// compressor (or another level) writes it.
func recompress(t *testing.T, pkg []byte, level int) []byte {
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
	w, _ := gzip.NewWriterLevel(&out, level)
	w.Write(raw)
	w.Close()
	return out.Bytes()
}

// A package's tree is what it holds, not how it was compressed: the
// digest Fetch returns with a package is PackageTree's of its bytes, the
// same package compressed otherwise has the same tree and another
// sha256, and a file's bytes, its executable bit, a link's target or a
// name each make another tree.
func TestPackageTreeIsWhatThePackageHolds(t *testing.T) {
	ctx := context.Background()
	pack := func(edit func(dir string)) ([]byte, Result) {
		t.Helper()
		dir := t.TempDir()
		for name, data := range map[string]string{"main.tf": "# m\n", "sub/x.tf": "# x\n", "bin/run.sh": "#!/bin/sh\n"} {
			p := filepath.Join(dir, filepath.FromSlash(name))
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		os.Chmod(filepath.Join(dir, "bin/run.sh"), 0o755)
		if err := os.Symlink("sub/x.tf", filepath.Join(dir, "link.tf")); err != nil {
			t.Fatal(err)
		}
		if edit != nil {
			edit(dir)
		}
		var b bytes.Buffer
		res, err := PackDir(ctx, dir, t.TempDir(), &b, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		return b.Bytes(), res
	}
	pkg, res := pack(nil)
	tree, err := PackageTree(ctx, bytes.NewReader(pkg), Limits{})
	if err != nil || tree != res.Tree || !strings.HasPrefix(tree, TreePrefix) {
		t.Fatalf("PackageTree = %q, %v; Fetch's %q", tree, err, res.Tree)
	}
	for _, level := range []int{gzip.NoCompression, gzip.BestSpeed, gzip.DefaultCompression} {
		other := recompress(t, pkg, level)
		if bytes.Equal(other, pkg) {
			t.Fatalf("level %d wrote the same bytes: no test of another compressor", level)
		}
		if got, err := PackageTree(ctx, bytes.NewReader(other), Limits{}); err != nil || got != tree {
			t.Errorf("compressed at level %d: tree %q (%v), want %q", level, got, err, tree)
		}
	}
	for what, edit := range map[string]func(dir string){
		"a file's bytes":    func(dir string) { os.WriteFile(filepath.Join(dir, "main.tf"), []byte("# M\n"), 0o644) },
		"an executable bit": func(dir string) { os.Chmod(filepath.Join(dir, "main.tf"), 0o755) },
		"a link's target": func(dir string) {
			os.Remove(filepath.Join(dir, "link.tf"))
			os.Symlink("main.tf", filepath.Join(dir, "link.tf"))
		},
		"a name":             func(dir string) { os.Rename(filepath.Join(dir, "sub/x.tf"), filepath.Join(dir, "sub/y.tf")) },
		"a file more":        func(dir string) { os.WriteFile(filepath.Join(dir, "extra.tf"), nil, 0o644) },
		"an empty directory": func(dir string) { os.Mkdir(filepath.Join(dir, "empty"), 0o755) },
	} {
		if _, res := pack(edit); res.Tree == tree {
			t.Errorf("%s changed, the tree did not", what)
		}
	}
	if _, err := PackageTree(ctx, strings.NewReader("not a package"), Limits{}); err == nil {
		t.Error("PackageTree of no gzip: no error")
	}
	var tarBomb bytes.Buffer
	gz := gzip.NewWriter(&tarBomb)
	tw := tar.NewWriter(gz)
	for i := range 20 {
		tw.WriteHeader(&tar.Header{Name: strings.Repeat("d", i+1) + "/", Typeflag: tar.TypeDir, Mode: 0o755})
	}
	tw.Close()
	gz.Close()
	if _, err := PackageTree(ctx, &tarBomb, Limits{MaxEntries: 10}); !errors.As(err, new(*LimitError)) {
		t.Errorf("over the entry limit: %v", err)
	}
}

// What an unpacker may apply beyond the permissions (a setuid bit, an
// owner) makes another tree, though Fetch writes none of it: a package
// from elsewhere (an import) that carries it is not the package first
// stored.
func TestPackageTreeTakesWhatAnUnpackerMayApply(t *testing.T) {
	one := func(h tar.Header) string {
		t.Helper()
		var b bytes.Buffer
		gz := gzip.NewWriter(&b)
		tw := tar.NewWriter(gz)
		h.Name, h.Typeflag, h.Size = "run.sh", tar.TypeReg, 3
		tw.WriteHeader(&h)
		tw.Write([]byte("#!\n"))
		tw.Close()
		gz.Close()
		tree, err := PackageTree(context.Background(), &b, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		return tree
	}
	plain := one(tar.Header{Mode: 0o755})
	for what, h := range map[string]tar.Header{
		"a setuid bit": {Mode: 0o4755},
		"an owner":     {Mode: 0o755, Uid: 1000},
		"a group name": {Mode: 0o755, Gname: "wheel"},
	} {
		if one(h) == plain {
			t.Errorf("%s: the same tree", what)
		}
	}
	if one(tar.Header{Mode: 0o755, ModTime: time.Unix(1e9, 0)}) != plain {
		t.Error("a time: another tree")
	}
}
