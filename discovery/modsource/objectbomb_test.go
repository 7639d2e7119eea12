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
	"io"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
)

// zeroObjectPack is a pack whose one object of type typ (1 commit, 2
// tree) declares size bytes, all zeros: a zlib bomb some size/1300 bytes
// long (zlibZeros). A tree is named by a commit before it; a commit is
// the pack's only object. It returns the pack and the commit's id.
func zeroObjectPack(t *testing.T, typ byte, size int64) (string, []byte) {
	t.Helper()
	zeros := make([]byte, 1<<20)
	id := sha1.New()
	fmt.Fprintf(id, "%s %d\x00", gitTypeNames[typ], size)
	for n := size; n > 0; n -= int64(len(zeros)) {
		id.Write(zeros[:min(n, int64(len(zeros)))])
	}
	bombID := id.Sum(nil)

	var objects []gitObject
	head := hex.EncodeToString(bombID)
	if typ == 2 {
		c := gitObject{1, fmt.Appendf(nil, "tree %x\nauthor A <a@example.com> 0 +0000\ncommitter A <a@example.com> 0 +0000\n\nm\n", bombID)}
		objects = append(objects, c)
		head = hex.EncodeToString(c.id())
	}
	pack := wholePack(objects...)
	pack = pack[:len(pack)-sha1.Size]
	binary.BigEndian.PutUint32(pack[8:], uint32(len(objects)+1))
	c := typ<<4 | byte(size&0x0f)
	for s := uint64(size) >> 4; s != 0; s >>= 7 {
		pack = append(pack, c|0x80)
		c = byte(s & 0x7f)
	}
	pack = append(pack, c)
	pack = append(pack, zlibZeros(t, size)...)
	sum := sha1.Sum(pack)
	return head, append(pack, sum[:]...)
}

// zlibZeros is a zlib stream of size zeros, size one more than a multiple
// of 258, written by hand (compress/flate takes minutes for 512 MiB under
// the race detector): one block of DEFLATE's fixed codes, a literal zero,
// then copies of the longest length (258) from one byte back, 13 bits
// each.
func zlibZeros(t *testing.T, size int64) []byte {
	t.Helper()
	if size < 1 || (size-1)%258 != 0 {
		t.Fatalf("zlibZeros(%d): not one more than a multiple of 258", size)
	}
	out := []byte{0x78, 0x01}
	var acc uint64
	var nacc uint
	bits := func(v uint64, n uint) { // least significant bit first
		acc |= v << nacc
		for nacc += n; nacc >= 8; nacc -= 8 {
			out = append(out, byte(acc))
			acc >>= 8
		}
	}
	code := func(c uint64, n uint) { // a Huffman code, most significant bit first
		var r uint64
		for i := range n {
			r |= (c >> i & 1) << (n - 1 - i)
		}
		bits(r, n)
	}
	bits(1, 1)          // the final block
	bits(1, 2)          // of fixed codes
	code(0b00110000, 8) // the literal 0
	for range (size - 1) / 258 {
		code(0b11000101, 8) // length 258 (code 285)
		code(0, 5)          // distance 1 (code 0)
	}
	code(0, 7) // end of block (code 256)
	if nacc > 0 {
		out = append(out, byte(acc))
	}
	// Adler-32 of zeros: a stays 1, b adds 1 for each byte.
	return binary.BigEndian.AppendUint32(out, uint32(size%65521)<<16|1)
}

// allocated is what the process has allocated on the heap so far.
func allocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// One tree (or commit) object declaring 512 MiB of zeros, in a pack of
// 3 MiB: within the download limit, and within what the pack's
// objects may unpack to in all with the default limits (the files' 512
// MiB, 1 KiB for each of the 20,000 entries, 1 MiB: 533 MiB). go-git
// makes room for an object's declared size and inflates it whole while it
// indexes the pack, so it took 512 MiB of memory and more; a directory
// of the entries allowed is some 20 MiB, a commit a few KiB, and the pack
// is refused from the object's header, the fetch allocating a few MiB.
func TestFetchGitBoundsOneObject(t *testing.T) {
	limits := Limits{MaxDownloadBytes: 256 << 20, MaxTreeBytes: 512 << 20, MaxEntries: 20_000, MaxSubmoduleDepth: 1}
	const size = 1 + 258*2_080_769 // 512 MiB less 32 KiB (zlibZeros)
	for _, tc := range []struct {
		typ  byte
		want string
	}{
		{2, fmt.Sprintf("tree object of %d bytes, more than the %d bytes a directory of the 20000 files and directories allowed takes", size, 20001<<10)},
		{1, fmt.Sprintf("commit object of %d bytes, more than the %d bytes allowed", size, 1<<20)},
	} {
		t.Run(gitTypeNames[tc.typ], func(t *testing.T) {
			head, pack := zeroObjectPack(t, tc.typ, size)
			t.Logf("pack of %d bytes", len(pack))
			srv := httptest.NewTLSServer(oneTagGit(head, pack))
			defer srv.Close()
			f := &Fetcher{HTTP: srv.Client(), Limits: limits, TempDir: t.TempDir()}
			a, err := Parse("git::" + srv.URL + "/bomb.git?ref=v1")
			if err != nil {
				t.Fatal(err)
			}
			runtime.GC()
			before := allocated()
			growth := heapGrowth(func() { _, err = f.Fetch(context.Background(), a, new(bytes.Buffer)) })
			alloc := allocated() - before
			t.Logf("Fetch: %v; allocated %d MiB, heap grew by %d MiB", err, alloc>>20, growth>>20)
			var le *LimitError
			if !errors.As(err, &le) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Fetch: %v, want a LimitError saying %q", err, tc.want)
			}
			if alloc > 64<<20 {
				t.Errorf("the fetch allocated %d MiB; want under 64 MiB", alloc>>20)
			}
		})
	}
}

// zlibZeros inflates to its size in zeros.
func TestZlibZeros(t *testing.T) {
	for _, size := range []int64{1, 259, 1 + 258*1000} {
		zr, err := zlib.NewReader(bytes.NewReader(zlibZeros(t, size)))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(zr)
		if err != nil || int64(len(b)) != size || bytes.Count(b, []byte{0}) != len(b) {
			t.Fatalf("size %d: %d bytes, %v", size, len(b), err)
		}
	}
}
