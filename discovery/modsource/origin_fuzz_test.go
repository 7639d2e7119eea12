package modsource

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/memory"
)

// FuzzParseLocation holds Parse to what the mirror relies on of a module
// download location, which the origin registry chooses: it refuses with an
// *UnsupportedError or gives an https URL with a host and no credentials,
// a format the mirror unpacks, a clean subdirectory, and a Package that
// is the address in the location syntax (it parses back to the same
// address, without subdirectory).
func FuzzParseLocation(f *testing.F) {
	for _, s := range []string{
		"git::https://h.test/org/repo.git?ref=v1.2.0",
		"git::https://h.test/org/mono.git//modules/vpc?ref=v1",
		"github.com/org/repo?ref=v2",
		"bitbucket.org/org/repo//sub",
		"https://h.test/x/m.tgz//*",
		"https://api.h.test/repos/o/r/tarball/v1//*?archive=tar.gz&token=x",
		"https://h.test/m.tar.gz//sub?sig=a//b",
		"https://h.test/m.tar.gz//..\\..\\*",
		"git::https://h.test/r.git?ref=v1&x=https://y",
		"git::https://h.test/r.git?",
		"https::https://h.test/a%2F/m.zip#frag",
		"git::ssh://git@h.test/org/repo.git",
		"git@github.com:org/repo.git",
		"https://user:pw@h.test/m.zip",
		"https://h.test/m?archive=rar",
		"s3::https://s3.amazonaws.com/b/m.zip",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, location string) {
		a, err := Parse(location)
		if err != nil {
			if !errors.As(err, new(*UnsupportedError)) {
				t.Fatalf("Parse(%q): %v is not an *UnsupportedError", location, err)
			}
			return
		}
		u, err := url.Parse(a.URL)
		if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.Fragment != "" {
			t.Fatalf("Parse(%q) gives the URL %q (%v)", location, a.URL, err)
		}
		switch a.Kind {
		case KindGit:
			if a.Format != "" {
				t.Fatalf("Parse(%q) = %+v: a Git address with a format", location, a)
			}
		case KindArchive:
			if !slices.Contains(archiveExts, a.Format) || a.Ref != "" {
				t.Fatalf("Parse(%q) = %+v", location, a)
			}
		default:
			t.Fatalf("Parse(%q) = %+v: kind %q", location, a, a.Kind)
		}
		if a.Subdir != CleanSubdir(a.Subdir) || a.Subdir == ".." || strings.HasPrefix(a.Subdir, "../") {
			t.Fatalf("Parse(%q) gives the subdirectory %q", location, a.Subdir)
		}
		back, err := Parse(a.Package())
		want := a
		want.Subdir = ""
		if err != nil || back != want {
			t.Fatalf("Parse(%q) = %+v, whose Package %q parses to %+v, %v", location, a, a.Package(), back, err)
		}
	})
}

// FuzzGitPack feeds a pack, as a Git source host sends it, through what a
// fetch does with it: checkPack, then the indexing of a pack it accepted
// (indexPack, and go-git's too). None may panic, and what either stores
// of an accepted pack is within the bounds checkPack holds the pack to;
// what indexPack stores reads back, each object hashing to its id.
//
// Run it with -fuzzminimizetime 1s, as TestFuzzersBriefly does. An input
// takes some 0.2 ms (5,000 execs/sec with one worker), but go test's
// default minimizes each new input for up to a minute and counts none of
// those runs until it is done, so the run shows 0 execs/sec meanwhile:
// the minimizer's pass that removes every run of bytes tries some n²/2
// candidates, millions for a pack of a few KiB such as the fuzz cache's
// corpus holds, so a new input grown from one can take the whole minute.
func FuzzGitPack(f *testing.F) {
	base := packObject{typ: 3, data: []byte("hello")}
	baseLen := int64(len(buildPack(f, base))) - 12
	delta := func(target uint64) packObject {
		d := append(varint(5), varint(target)...)
		d = append(d, 0x90, 0x05)
		return packObject{typ: 6, data: d, backOff: baseLen}
	}
	for _, p := range [][]byte{
		buildPack(f, base, delta(5)),
		buildPack(f, base, delta(10<<30)),
		buildPack(f, packObject{typ: 2, data: []byte("100644 a\x00" + strings.Repeat("\x01", 20))}),
		buildPack(f, packObject{typ: 1, data: []byte("tree " + strings.Repeat("0", 40) + "\n\nm\n")}),
		buildPack(f, packObject{typ: 4, data: []byte("object " + strings.Repeat("0", 40) + "\ntype commit\ntag v1\n\nm\n")}),
		buildPack(f, base, base, base),
		{},
	} {
		f.Add(p)
	}
	limits := Limits{MaxEntries: 8, MaxTreeBytes: 64 << 10}
	bounds := newPackBounds(limits)
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := checkPack(context.Background(), bytes.NewReader(data), bounds); err != nil {
			return
		}
		storage := memory.NewStorage()
		packfile.UpdateObjectStorage(storage, bytes.NewReader(data)) //nolint:errcheck // what it stored is checked either way
		n, total := 0, int64(0)
		for h, o := range storage.Objects {
			n++
			total += o.Size()
			if bound, over, _ := bounds.of(o.Type(), o.Size()); o.Size() > bound {
				t.Fatalf("stored object %s: %s", h, over)
			}
		}
		if n > int(bounds.objects) || total > bounds.total {
			t.Fatalf("stored %d objects of %d bytes in all, over %d objects, %d bytes", n, total, bounds.objects, bounds.total)
		}

		// indexPack, as a fetch indexes a pack, writes no more: every
		// object it wrote reads back within bounds, hashing to its id.
		dir := t.TempDir()
		spool, err := os.Create(filepath.Join(dir, "spool"))
		if err != nil {
			t.Fatal(err)
		}
		defer spool.Close()
		if _, err := spool.Write(data); err != nil {
			t.Fatal(err)
		}
		if indexPack(context.Background(), spool, osfs.New(filepath.Join(dir, "git"))) != nil {
			return
		}
		iter, err := filesystem.NewStorage(osfs.New(filepath.Join(dir, "git")), cache.NewObjectLRU(objectCacheBytes)).IterEncodedObjects(plumbing.AnyObject)
		if err != nil {
			t.Fatal(err)
		}
		n, total = 0, 0
		err = iter.ForEach(func(o plumbing.EncodedObject) error {
			n++
			total += o.Size()
			if bound, over, _ := bounds.of(o.Type(), o.Size()); o.Size() > bound {
				t.Fatalf("indexed object %s: %s", o.Hash(), over)
			}
			r, err := o.Reader()
			if err != nil {
				return err
			}
			defer r.Close()
			content, err := io.ReadAll(r)
			if err != nil {
				return err
			}
			if h := plumbing.ComputeHash(o.Type(), content); h != o.Hash() {
				t.Fatalf("indexed object %s reads back as %s", o.Hash(), h)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("reading the objects indexed: %v", err)
		}
		if n > int(bounds.objects) || total > bounds.total {
			t.Fatalf("indexed %d objects of %d bytes in all, over %d objects, %d bytes", n, total, bounds.objects, bounds.total)
		}
	})
}
