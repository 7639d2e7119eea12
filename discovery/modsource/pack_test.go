package modsource

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
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
