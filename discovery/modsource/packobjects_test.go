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
	"strconv"
	"strings"
	"testing"
)

// newJunkPackGit serves one commit whose tree holds main.tf, in a pack
// that holds besides it junk blobs that nothing names.
func newJunkPackGit(junk int) *fakeGit {
	mainTF := gitObject{3, []byte("# module\n")}
	var tree bytes.Buffer
	tree.WriteString("100644 main.tf\x00")
	tree.Write(mainTF.id())
	treeObj := gitObject{2, tree.Bytes()}
	c := gitObject{1, fmt.Appendf(nil, "tree %x\nauthor A <a@example.com> 0 +0000\ncommitter A <a@example.com> 0 +0000\n\nm\n", treeObj.id())}
	// wholePack, with one compressor for all objects.
	var b bytes.Buffer
	b.WriteString("PACK")
	binary.Write(&b, binary.BigEndian, uint32(2))
	binary.Write(&b, binary.BigEndian, uint32(3+junk))
	zw := zlib.NewWriter(io.Discard)
	add := func(typ byte, data []byte) {
		size := uint64(len(data))
		h := typ<<4 | byte(size&0x0f)
		for size >>= 4; size != 0; size >>= 7 {
			b.WriteByte(h | 0x80)
			h = byte(size & 0x7f)
		}
		b.WriteByte(h)
		zw.Reset(&b)
		zw.Write(data)
		zw.Close()
	}
	for _, o := range []gitObject{c, treeObj, mainTF} {
		add(o.typ, o.data)
	}
	var n []byte
	for i := range junk {
		n = strconv.AppendInt(n[:0], int64(i), 36)
		add(3, n)
	}
	sum := sha1.Sum(b.Bytes())
	b.Write(sum[:])
	return oneTagGit(hex.EncodeToString(c.id()), b.Bytes())
}

// TestFetchGitBoundsPackObjects: a shallow pack of one commit holds no
// more objects than the package's entries (a tree per directory, a blob
// per file or link) and its commit and tags. A pack of 200,000 tiny
// objects (3 MiB, within the download limit, and declaring a few bytes
// each) is refused from its header, before go-git indexes it: indexing
// holds some 440 bytes for each object, which neither the download limit
// nor the objects' declared sizes bounded (200,000 objects grew the heap
// by 90 MiB; the 256 MiB download limit's worth of them, 16 million,
// would take 7 GiB). The same pack with as many junk objects as the
// package's entries allowed is fetched.
func TestFetchGitBoundsPackObjects(t *testing.T) {
	limits := defaultLimits
	limits.MaxDownloadBytes = 16 << 20
	for _, tc := range []struct {
		junk int
		ok   bool
	}{{0, true}, {limits.MaxEntries, true}, {200_000, false}} {
		t.Run(fmt.Sprintf("%d junk objects", tc.junk), func(t *testing.T) {
			srv := httptest.NewTLSServer(newJunkPackGit(tc.junk))
			defer srv.Close()
			f := &Fetcher{HTTP: srv.Client(), Limits: limits, TempDir: t.TempDir()}
			a, err := Parse("git::" + srv.URL + "/repo.git?ref=v1")
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			var fetchErr error
			growth := heapGrowth(func() { _, fetchErr = f.Fetch(context.Background(), a, &buf) })
			t.Logf("heap grew by %d MiB", growth>>20)
			var le *LimitError
			switch {
			case tc.ok && fetchErr != nil:
				t.Fatal(fetchErr)
			case tc.ok:
				if files := readTarGz(t, buf.Bytes()); files["main.tf"] != "# module\n" {
					t.Errorf("package = %v", files)
				}
			case !errors.As(fetchErr, &le) || !strings.Contains(fetchErr.Error(), "objects"):
				t.Errorf("Fetch: %v, want a LimitError about the pack's objects", fetchErr)
			case growth > 32<<20:
				t.Errorf("the heap grew by %d MiB while the pack was refused", growth>>20)
			}
		})
	}
}
