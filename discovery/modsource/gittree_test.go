package modsource

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/safetree"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// refDelta is a reference delta of a test pack: the id of its base and
// the object it makes from it (data, the base's content and more).
type refDelta struct {
	base   []byte
	result gitObject
}

// packWithRefDeltas is a complete pack of objects, whole, then of deltas,
// each a reference delta that copies its base whole and inserts the rest
// of its result, as Git sends to a client that takes no offset deltas.
func packWithRefDeltas(objects []gitObject, deltas []refDelta, baseLen func(id []byte) int) []byte {
	var b bytes.Buffer
	b.WriteString("PACK")
	binary.Write(&b, binary.BigEndian, uint32(2))
	binary.Write(&b, binary.BigEndian, uint32(len(objects)+len(deltas)))
	header := func(typ byte, size int) {
		c := typ<<4 | byte(size&0x0f)
		for s := uint64(size) >> 4; s != 0; s >>= 7 {
			b.WriteByte(c | 0x80)
			c = byte(s & 0x7f)
		}
		b.WriteByte(c)
	}
	deflate := func(data []byte) {
		zw := zlib.NewWriter(&b)
		zw.Write(data)
		zw.Close()
	}
	for _, o := range objects {
		header(o.typ, len(o.data))
		deflate(o.data)
	}
	for _, d := range deltas {
		n := baseLen(d.base)
		delta := append(varint(uint64(n)), varint(uint64(len(d.result.data)))...)
		// Copy the base's n bytes from offset 0 (n < 64 KiB).
		delta = append(delta, 0x80|0x10|0x20, byte(n), byte(n>>8))
		for rest := d.result.data[n:]; len(rest) > 0; {
			k := min(len(rest), 127)
			delta = append(delta, byte(k))
			delta = append(delta, rest[:k]...)
			rest = rest[k:]
		}
		header(7, len(delta))
		b.Write(d.base)
		deflate(delta)
	}
	sum := sha1.Sum(b.Bytes())
	b.Write(sum[:])
	return b.Bytes()
}

// treeEntry is one line of a tree object: "MODE NAME\0ID".
func treeEntry(mode, name string, id []byte) []byte {
	return append([]byte(mode+" "+name+"\x00"), id...)
}

// commitOf is a commit of the tree root.
func commitOf(root gitObject) gitObject {
	return gitObject{1, fmt.Appendf(nil, "tree %x\nauthor A <a@example.com> 0 +0000\ncommitter A <a@example.com> 0 +0000\n\nm\n", root.id())}
}

// TestFetchGitBoundsATreeOfReferenceDeltas: a tree made by a chain of
// reference deltas (whose type checkPack cannot know from the pack, so
// bounds as a blob's) and larger than a directory of the entries allowed
// takes is refused with a LimitError about the tree object, before go-git
// decodes it: at the top of the package, and as a directory of it.
func TestFetchGitBoundsATreeOfReferenceDeltas(t *testing.T) {
	mainTF := gitObject{3, []byte("# main\n")}
	line := func(i int) []byte {
		return treeEntry("100644", fmt.Sprintf("f%04d%s.tf", i, strings.Repeat("x", 240)), mainTF.id())
	}
	// A tree of entries of long names, over treeObjectLimit(defaultLimits)
	// (and of more entries than allowed, which the walk would refuse
	// after decoding it): its first entry, then half of it, then all.
	var full []byte
	for i := 0; len(full) <= int(treeObjectLimit(defaultLimits)); i++ {
		full = append(full, line(i)...)
	}
	n := len(line(0)) // every line's
	first, middle, big := gitObject{2, full[:n]}, gitObject{2, full[:len(full)/n/2*n]}, gitObject{2, full}
	sizes := map[string]int{}
	for _, o := range []gitObject{first, middle, big} {
		sizes[string(o.id())] = len(o.data)
	}
	baseLen := func(id []byte) int { return sizes[string(id)] }
	chain := []refDelta{{first.id(), middle}, {middle.id(), big}}

	modules := gitObject{2, append(treeEntry("100644", "main.tf", mainTF.id()), treeEntry("40000", "modules", big.id())...)}
	for _, tc := range []struct {
		name string
		root gitObject
		more []gitObject
	}{
		{"top", big, nil},
		{"directory", modules, []gitObject{modules}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			commit := commitOf(tc.root)
			pack := packWithRefDeltas(append([]gitObject{commit, mainTF, first}, tc.more...), chain, baseLen)
			err := fetchGitFrom(t, oneTagGit(hex.EncodeToString(commit.id()), pack))
			var le *LimitError
			if !errors.As(err, &le) || !strings.Contains(err.Error(), fmt.Sprintf("tree object of %d bytes", len(big.data))) {
				t.Errorf("Fetch: %v, want a LimitError about the tree object of %d bytes", err, len(big.data))
			}
		})
	}
}

// TestFetchGitRefusesMalformedTrees: a tree that Git's fsck refuses (an
// entry named twice, a file and a directory of one name, entries out of
// Git's order, an entry name holding a slash) gives no package, and the
// error says what is wrong with which entry. Before, the walk wrote the
// later entry of a name over the earlier one (or one tree's entries over
// another's), and the package was served, cached and pinned as fetched.
func TestFetchGitRefusesMalformedTrees(t *testing.T) {
	one, two := gitObject{3, []byte("# one\n")}, gitObject{3, []byte("# two\n")}
	sub := gitObject{2, treeEntry("100644", "x.tf", one.id())}
	tree := func(lines ...[]byte) gitObject { return gitObject{2, bytes.Join(lines, nil)} }
	for _, tc := range []struct {
		name string
		root gitObject
		want string
	}{
		{"a file twice", tree(treeEntry("100644", "main.tf", one.id()), treeEntry("100644", "main.tf", two.id())), `"main.tf" twice`},
		{"a directory twice", tree(treeEntry("40000", "d", sub.id()), treeEntry("40000", "d", sub.id())), `"d" twice`},
		// Git's order puts "a-b.tf" between the file "a" and the
		// directory "a" (as "a/"): the two are not next to each other.
		{"a file and a directory of one name", tree(treeEntry("100644", "a", one.id()), treeEntry("100644", "a-b.tf", one.id()), treeEntry("40000", "a", sub.id())), `"a" twice`},
		{"entries out of order", tree(treeEntry("100644", "z.tf", one.id()), treeEntry("100644", "a.tf", two.id())), `"a.tf" after "z.tf"`},
		{"a directory out of order", tree(treeEntry("40000", "d", sub.id()), treeEntry("100644", "d.tf", one.id())), `"d.tf" after "d"`},
		{"a name with a slash", tree(treeEntry("40000", "d", sub.id()), treeEntry("100644", "d/x.tf", two.id())), `"d/x.tf"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			commit := commitOf(tc.root)
			err := fetchGitFrom(t, oneTagGit(hex.EncodeToString(commit.id()), wholePack(commit, tc.root, sub, one, two)))
			if !errors.Is(err, ErrBadPackage) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "/repo.git") {
				t.Errorf("Fetch: %v, want the package refused as the source's, saying %s and naming the repository", err, tc.want)
			}
		})
	}
}

// TestFetchGitKeepsCaseOnlyNames: names of one tree that differ only in
// case (main.tf, Main.tf, MAIN.TF; the directories mod and Mod) are each
// written with its own content, as `git checkout` writes them on Linux:
// a package served to a Linux client is what a direct install gives.
// None replaces another, on the mirror's disk (Linux's, which tells them
// apart) or in the package.
func TestFetchGitKeepsCaseOnlyNames(t *testing.T) {
	o, _ := originWithLeaf(t)
	files := map[string][]byte{
		"main.tf": []byte("# lower\n"), "Main.tf": []byte("# title\n"), "MAIN.TF": []byte("# upper\n"),
		"mod/a.tf": []byte("# mod\n"), "Mod/a.tf": []byte("# Mod\n"),
	}
	if _, err := o.AddGitTree("cases", fakeorigin.GitTree{Files: files}, "v1"); err != nil {
		t.Fatal(err)
	}
	a, _ := Parse("git::" + o.GitURL("cases") + "?ref=v1")
	var buf bytes.Buffer
	if _, err := newFetcher(t, o, defaultLimits).Fetch(context.Background(), a, &buf); err != nil {
		t.Fatalf("Fetch: %v, want every name kept", err)
	}
	got := readTarGz(t, buf.Bytes())
	for name, content := range files {
		if got[name] != string(content) {
			t.Errorf("package[%s] = %q, want %q (package: %v)", name, got[name], content, got)
		}
	}
}

// TestFetchGitCaseOnlyLinksStayIn: links whose names differ from a
// directory's only in case, which a client comparing names without case
// (macOS, Windows) would take for that directory, neither write outside
// the scratch directory nor give a package with a link that leads out
// of it on such a client: the fetch is refused as unsafe, or its links
// all stay in.
func TestFetchGitCaseOnlyLinksStayIn(t *testing.T) {
	o, _ := originWithLeaf(t)
	// On Linux, A is a/b, and up (A/../..) the package's top; where A
	// and a are one name, up leads out.
	if _, err := o.AddGitTree("caselinks", fakeorigin.GitTree{
		Files: map[string][]byte{"a/b/main.tf": []byte("# b\n"), "main.tf": []byte("# top\n")},
		Links: map[string]string{"A": "a/b", "up": "A/../.."},
	}, "v1"); err != nil {
		t.Fatal(err)
	}
	s := newHostileScene(t)
	f := newFetcher(t, o, defaultLimits)
	f.TempDir = s.scratch
	a, _ := Parse("git::" + o.GitURL("caselinks") + "?ref=v1")
	var buf bytes.Buffer
	_, err := f.Fetch(context.Background(), a, &buf)
	s.untouched(t)
	switch {
	case err == nil:
		noLinkOut(t, buf.Bytes())
	case !errors.Is(err, safetree.ErrUnsafe):
		t.Errorf("refused for another reason than its links: %v", err)
	default:
		t.Logf("refused: %v", err)
	}
}

// TestFetchGitWritesNoEntryOverAnother: two entries of a Git tree that
// the package would hold under one name (a name with a backslash, which
// the package takes for a separator as Windows does, beside the file it
// would name) give no package, where the later was written over the
// earlier: `git checkout` on Linux writes both, which no package can
// hold, and one of them would be lost without a word.
func TestFetchGitWritesNoEntryOverAnother(t *testing.T) {
	o, _ := originWithLeaf(t)
	if _, err := o.AddGitTree("aliased", fakeorigin.GitTree{Files: map[string][]byte{
		"d/x.tf": []byte("# one\n"), `d\x.tf`: []byte("# two\n"),
	}}, "v1"); err != nil {
		t.Fatal(err)
	}
	a, _ := Parse("git::" + o.GitURL("aliased") + "?ref=v1")
	var buf bytes.Buffer
	_, err := newFetcher(t, o, defaultLimits).Fetch(context.Background(), a, &buf)
	if !errors.Is(err, ErrBadPackage) || !strings.Contains(err.Error(), `d\\x.tf`) {
		t.Errorf("Fetch: %v (package %v), want the package refused naming the entry written over another", err, readTarGzOrNil(t, buf.Bytes()))
	}
}

// readTarGzOrNil is readTarGz of pkg, nil when there is none.
func readTarGzOrNil(t *testing.T, pkg []byte) map[string]string {
	if len(pkg) == 0 {
		return nil
	}
	return readTarGz(t, pkg)
}
