package modsource

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tfmirror/tfmirror/internal/fakeorigin"
	"github.com/tfmirror/tfmirror/internal/safetree"
)

// FuzzUnpack unpacks a tar (gzipped by the test) into a directory beside
// which lie a victim directory and a victim file. After every input,
// accepted or not: nothing beside the directory changed, and every link
// in it resolves inside it, by CheckLinks and by the system.
func FuzzUnpack(f *testing.F) {
	for _, climb := range []int{1, 2} {
		f.Add(gunzipBytes(hostileTarGz(climb)))
	}
	link := func(name, target string) fakeorigin.TarEntry {
		return fakeorigin.TarEntry{Name: name, Type: tar.TypeSymlink, Target: target}
	}
	for _, entries := range [][]fakeorigin.TarEntry{
		{link("a", "b/c"), link("b/c", "../.."), {Name: "a/x", Body: "x"}},
		{link("l", "."), {Name: "l/l2", Type: tar.TypeSymlink, Target: "../victim"}, {Name: "l/l2/pwned", Body: "x"}},
		{link("v", "../victim.txt"), {Name: "v", Body: "x"}},
		{{Name: "d/", Type: tar.TypeDir}, link("d", "..")},
		{link(`up`, "."), link(`up\esc`, "../victim"), {Name: `up\esc\pwned`, Body: "x"}},
		{{Name: "ok/main.tf", Body: "# ok\n"}, link("ok/self", "."), link("top", "ok/self/..")},
	} {
		f.Add(gunzipBytes(fakeorigin.TarGzEntries(entries)))
	}
	f.Fuzz(func(t *testing.T, tarBytes []byte) {
		base := t.TempDir()
		dir := filepath.Join(base, "pkg")
		victim := filepath.Join(base, "victim")
		victimFile := filepath.Join(base, "victim.txt")
		for _, d := range []string{dir, victim} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(victimFile, []byte(victimBytes), 0o600); err != nil {
			t.Fatal(err)
		}
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(tarBytes) //nolint:errcheck // memory
		zw.Close()
		Unpack(context.Background(), &gz, dir, defaultLimits) //nolint:errcheck // the property holds either way

		if ents, err := os.ReadDir(victim); err != nil || len(ents) > 0 {
			t.Fatalf("the victim directory holds %v (%v)", ents, err)
		}
		b, err := os.ReadFile(victimFile)
		fi, serr := os.Lstat(victimFile)
		if err != nil || serr != nil || string(b) != victimBytes || fi.Mode() != 0o600 {
			t.Fatalf("the victim file changed: %q (%v %v)", b, err, serr)
		}
		if ents, _ := os.ReadDir(base); len(ents) != 3 {
			t.Fatalf("beside the directory: %v", ents)
		}
		links, err := safetree.Links(os.DirFS(dir), 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := safetree.CheckLinks(links); err != nil {
			t.Fatalf("a link out: %v", err)
		}
		real, _ := filepath.EvalSymlinks(dir)
		for name := range links {
			p, err := filepath.EvalSymlinks(filepath.Join(dir, name))
			if err != nil {
				continue // leads nowhere
			}
			if rel, err := filepath.Rel(real, p); err != nil || !filepath.IsLocal(rel) && rel != "." {
				t.Fatalf("the link %s resolves to %s, outside", name, p)
			}
		}
	})
}

// gunzipBytes returns the tar inside a tar.gz made in memory.
func gunzipBytes(data []byte) []byte {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		panic(err)
	}
	var out bytes.Buffer
	out.ReadFrom(zr) //nolint:errcheck // memory
	return out.Bytes()
}
