package modsource

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
)

// packObject is one object of a test pack: its type (3 blob, 6 offset
// delta), its data, and for a delta the distance back to its base.
type packObject struct {
	typ     byte
	data    []byte
	backOff int64
}

// buildPack writes a pack of objects, without its trailing checksum
// (checkPack does not read it).
func buildPack(t testing.TB, objects ...packObject) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("PACK")
	binary.Write(&b, binary.BigEndian, uint32(2))
	binary.Write(&b, binary.BigEndian, uint32(len(objects)))
	for _, o := range objects {
		size := uint64(len(o.data))
		c := o.typ<<4 | byte(size&0x0f)
		size >>= 4
		for size != 0 {
			b.WriteByte(c | 0x80)
			c = byte(size & 0x7f)
			size >>= 7
		}
		b.WriteByte(c)
		if o.typ == 6 {
			if o.backOff >= 128 {
				t.Fatal("test offsets fit one byte")
			}
			b.WriteByte(byte(o.backOff))
		}
		zw := zlib.NewWriter(&b)
		zw.Write(o.data)
		zw.Close()
	}
	return b.Bytes()
}

// varint is the base-128 number of a delta header.
func varint(n uint64) []byte {
	var out []byte
	for {
		c := byte(n & 0x7f)
		n >>= 7
		if n == 0 {
			return append(out, c)
		}
		out = append(out, c|0x80)
	}
}

func TestCheckPack(t *testing.T) {
	const limit = 1 << 20
	bounds := packBounds{objects: 4, total: limit, blob: limit, tree: 4 << 10, entries: 3, commit: 1 << 10}
	base := packObject{typ: 3, data: []byte("hello")}
	tree := packObject{typ: 2, data: []byte("hello")}
	baseLen := int64(len(buildPack(t, base))) - 12 // the object's bytes, after the pack header
	delta := func(target uint64) packObject {
		d := append(varint(5), varint(target)...)
		d = append(d, 0x90, 0x05) // copy 5 bytes from offset 0 (size in the next byte)
		return packObject{typ: 6, data: d, backOff: baseLen}
	}
	for name, tc := range map[string]struct {
		pack []byte
		ok   bool
	}{
		"small objects":             {buildPack(t, base, delta(5)), true},
		"a blob of zeros too large": {buildPack(t, base, packObject{typ: 3, data: make([]byte, limit+1)}), false},
		"a delta making 10 GiB":     {buildPack(t, base, delta(10<<30)), false},
		"more objects than allowed": {buildPack(t, base, base, base, base, base), false},
		"blobs too large together":  {buildPack(t, packObject{typ: 3, data: make([]byte, limit/2)}, packObject{typ: 3, data: make([]byte, limit/2+1)}), false},
		"a tree within its bound":   {buildPack(t, packObject{typ: 2, data: make([]byte, 4<<10)}), true},
		"a tree too large":          {buildPack(t, packObject{typ: 2, data: make([]byte, 4<<10+1)}), false},
		"a commit within its bound": {buildPack(t, packObject{typ: 1, data: make([]byte, 1<<10)}), true},
		"a commit too large":        {buildPack(t, packObject{typ: 1, data: make([]byte, 1<<10+1)}), false},
		"a tag too large":           {buildPack(t, packObject{typ: 4, data: make([]byte, 1<<10+1)}), false},
		"a delta making a blob":     {buildPack(t, base, delta(8<<10)), true},
		"a delta making a tree":     {buildPack(t, tree, delta(4<<10)), true},
		"a delta making a big tree": {buildPack(t, tree, delta(8<<10)), false},
	} {
		t.Run(name, func(t *testing.T) {
			err := checkPack(context.Background(), bytes.NewReader(tc.pack), bounds)
			var le *LimitError
			switch {
			case tc.ok && err != nil:
				t.Fatalf("refused: %v", err)
			case !tc.ok && !errors.As(err, &le):
				t.Fatalf("%v, want a LimitError", err)
			}
		})
	}
}

// A tree a reference delta makes (its type unknown to checkPack) is
// refused by the storage the package is read through before go-git
// decodes it: through the commit that names it, and by a tree walk.
func TestBoundedObjectsRefusesLargeTrees(t *testing.T) {
	mem := memory.NewStorage()
	put := func(typ plumbing.ObjectType, data []byte) plumbing.Hash {
		o := mem.NewEncodedObject()
		o.SetType(typ)
		w, _ := o.Writer()
		w.Write(data)
		w.Close()
		h, err := mem.SetEncodedObject(o)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	blob := put(plumbing.BlobObject, []byte("x"))
	entry := func(name string) []byte { return append([]byte("100644 "+name+"\x00"), blob[:]...) }
	var big []byte
	for i := range 200 {
		big = append(big, entry(fmt.Sprintf("f%03d", i))...)
	}
	bigTree := put(plumbing.TreeObject, big)
	smallTree := put(plumbing.TreeObject, entry("main.tf"))
	commit := func(tree plumbing.Hash) plumbing.Hash {
		return put(plumbing.CommitObject, fmt.Appendf(nil, "tree %s\nauthor A <a@example.com> 0 +0000\ncommitter A <a@example.com> 0 +0000\n\nm\n", tree))
	}
	s := boundedObjects{EncodedObjectStorer: mem, bounds: newPackBounds(Limits{MaxDownloadBytes: 1 << 20, MaxTreeBytes: 1 << 20, MaxEntries: 2})}
	if s.bounds.tree >= int64(len(big)) || s.bounds.tree < int64(len(entry("main.tf"))) {
		t.Fatalf("tree bound %d: the test's trees are %d and %d bytes", s.bounds.tree, len(big), len(entry("main.tf")))
	}
	c, err := peelToCommit(s, commit(smallTree))
	if err != nil {
		t.Fatal(err)
	}
	if tree, err := c.Tree(); err != nil || len(tree.Entries) != 1 {
		t.Fatalf("a tree within bounds: %v", err)
	}
	c, err = peelToCommit(s, commit(bigTree))
	if err != nil {
		t.Fatal(err)
	}
	var le *LimitError
	if _, err := c.Tree(); !errors.As(err, &le) || !strings.Contains(err.Error(), "tree object of") {
		t.Fatalf("a tree over its bound: %v, want a LimitError", err)
	}
	if _, err := object.GetTree(s, bigTree); !errors.As(err, &le) {
		t.Fatalf("GetTree: %v, want a LimitError", err)
	}
}
