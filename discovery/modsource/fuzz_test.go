package modsource

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/safetree"
)

// FuzzUnpack unpacks a tar (gzipped by the test) into a directory beside
// which lie a victim directory and a victim file. After every input,
// accepted or not: nothing beside the directory changed, and every link
// in it resolves inside it, by CheckLinks and by the system.
//
// The input is the tar's entries in a few bytes (specTar), not the tar
// itself: the fuzzer varies names, targets, kinds and order, which is
// where an escape lies, instead of header checksums; and the seeds are
// small, so that minimizing an interesting input takes a moment and a
// short run (CI's 10 s, proxy's TestFuzzersBriefly) explores.
func FuzzUnpack(f *testing.F) {
	for _, spec := range []string{
		// The link chain: a link back to the top from a directory, links
		// made through it to the victims, files written through those.
		"ld/up>..\nld/up/k>..\nld/up/e>../victim\nfd/up/e/p>x\nfd/up/k/victim.txt>x",
		// The same with backslashes, as in a Git tree.
		"lu>.\nlu\\e>../victim\nfu\\e\\p>x",
		// Links out, and entries written through them.
		"lo>../victim\nfo/p>x",
		"lv>../victim.txt\nfv>x",
		"lv>../victim.txt\nhh>v\nfh>x",
		"hh>../victim.txt\nfh>x",
		// A parent that is a link, or becomes one.
		"la>b/c\nlb/c>../..\nfa/x>x",
		"ll>.\nll/m>../victim\nfl/m/p>x",
		"dd/\nld>..\nfd/p>x",
		// Links that stay inside.
		"fo/m>x\nlo/s>.\nlt>o/s/..",
	} {
		f.Add(spec)
	}
	// The victims are made once: an input that changed them fails at
	// once. Each input is unpacked into a new pkg, removed after it.
	base := f.TempDir()
	dir := filepath.Join(base, "pkg")
	victim := filepath.Join(base, "victim")
	victimFile := filepath.Join(base, "victim.txt")
	if err := os.Mkdir(victim, 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(victimFile, []byte(victimBytes), 0o600); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
		}()
		Unpack(context.Background(), bytes.NewReader(specTar(spec)), dir, defaultLimits) //nolint:errcheck // the property holds either way

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
		// Walked by the system, not io/fs: it must see every name.
		links := map[string]string{}
		err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.Type()&fs.ModeSymlink == 0 {
				return err
			}
			target, err := os.Readlink(p)
			rel, _ := filepath.Rel(dir, p)
			links[filepath.ToSlash(rel)] = target
			return err
		})
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

// specTar is the tar.gz that spec describes: entries one a line, each
// a kind byte, the name, and after the first '>' a link's target or a
// file's body:
//
//	fNAME>BODY    a regular file (0644)
//	dNAME         a directory (0755)
//	lNAME>TARGET  a symbolic link
//	hNAME>TARGET  a hard link
//
// Any other kind byte is the entry's tar type flag as it is. An entry the
// tar writer refuses (a NUL in its name) is left out.
func specTar(spec string) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for line := range strings.SplitSeq(spec, "\n") {
		if line == "" {
			continue
		}
		name, arg, _ := strings.Cut(line[1:], ">")
		h := &tar.Header{Name: name, Typeflag: line[0], Mode: 0o644}
		switch line[0] {
		case 'f':
			h.Typeflag, h.Size = tar.TypeReg, int64(len(arg))
		case 'd':
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		case 'l':
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, arg, 0o777
		case 'h':
			h.Typeflag, h.Linkname = tar.TypeLink, arg
		default:
			h.Linkname = arg
		}
		if tw.WriteHeader(h) != nil {
			continue // what a tar cannot hold
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(arg)) //nolint:errcheck // memory
		}
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}
