package modsource

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// deltaChainGit serves a repository whose pack holds main.tf, its tree
// and commits of size bytes each, as chains of chain offset deltas (each
// commit a copy of the one before it but its last 9 bytes): a few hundred
// KiB on the wire that declare a few hundred MiB, within the default
// limits. main, v1 and HEAD name the last commit; first is the first.
// It offers partial fetches, to be asked for an abbreviated id, and
// answers every request with the same pack.
type deltaChainGit struct {
	*fakeGit
	first string
}

func newDeltaChainGit(commits, chain, size int) *deltaChainGit {
	mainTF := gitObject{3, []byte("# module\n")}
	tree := gitObject{2, append([]byte("100644 main.tf\x00"), mainTF.id()...)}
	header := fmt.Sprintf("tree %x\nauthor A <a@example.com> 0 +0000\ncommitter A <a@example.com> 0 +0000\n\n", tree.id())
	commit := func(i int) []byte {
		b := []byte(header)
		b = append(b, bytes.Repeat([]byte{'m'}, size-len(header)-9)...)
		return fmt.Appendf(b, "%08x\n", i)
	}
	var b bytes.Buffer
	b.WriteString("PACK")
	binary.Write(&b, binary.BigEndian, uint32(2))
	binary.Write(&b, binary.BigEndian, uint32(2+commits))
	zw := zlib.NewWriter(io.Discard)
	add := func(typ byte, size int, data []byte) int {
		off := b.Len()
		h := typ<<4 | byte(size&0x0f)
		for s := uint64(size) >> 4; s != 0; s >>= 7 {
			b.WriteByte(h | 0x80)
			h = byte(s & 0x7f)
		}
		b.WriteByte(h)
		return off
	}
	deflate := func(data []byte) {
		zw.Reset(&b)
		zw.Write(data)
		zw.Close()
	}
	for _, o := range []gitObject{mainTF, tree} {
		add(o.typ, len(o.data), nil)
		deflate(o.data)
	}
	// A delta: the base's size and the result's, a copy of the base's
	// first size-9 bytes, an insert of 9.
	varint := func(d []byte, n int) []byte {
		for ; n >= 0x80; n >>= 7 {
			d = append(d, byte(n)|0x80)
		}
		return append(d, byte(n))
	}
	var base int
	var last []byte
	g := &deltaChainGit{fakeGit: &fakeGit{
		refs:       []string{"refs/heads/main", "refs/tags/v1"},
		caps:       "shallow no-progress ofs-delta filter",
		deepenOnly: true,
	}}
	for i := range commits {
		c := commit(i)
		if i%chain == 0 {
			base = add(1, len(c), nil)
			deflate(c)
		} else {
			d := varint(varint(nil, size), size)
			n := size - 9
			d = append(d, 0x80|0x10|0x20|0x40, byte(n), byte(n>>8), byte(n>>16))
			d = append(d, 9)
			d = append(d, c[size-9:]...)
			off := add(6, len(d), nil)
			// The base's offset back from this object, as Git encodes it.
			rel := off - base
			enc := []byte{byte(rel & 0x7f)}
			for rel >>= 7; rel != 0; rel >>= 7 {
				rel--
				enc = append([]byte{byte(rel&0x7f) | 0x80}, enc...)
			}
			b.Write(enc)
			deflate(d)
			base = off
		}
		if i == 0 {
			g.first = hex.EncodeToString(gitObject{1, c}.id())
		}
		last = c
	}
	sum := sha1.Sum(b.Bytes())
	b.Write(sum[:])
	g.head, g.pack = hex.EncodeToString(gitObject{1, last}.id()), b.Bytes()
	return g
}

// productionLimits are tfmirror's default module limits (docs/modules.md).
var productionLimits = Limits{MaxDownloadBytes: 256 << 20, MaxTreeBytes: 512 << 20, MaxEntries: 20_000, MaxSubmoduleDepth: 2}

// honestGitRepo is a repository of 300 commits, each changing one of 40
// files of some 75 KiB of text (3 MiB in all), served by git
// http-backend with partial fetches; it returns the server, its client
// and the first commit's id.
func honestGitRepo(t testing.TB) (srv *httptest.Server, c *http.Client, first string) {
	root, work := newWorkRepo(t)
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"resource", "variable", "output", "module", "locals", "provider", "data", "count", "for_each", "depends_on"}
	files := make([][]string, 40)
	for i := range files {
		for range 3000 {
			files[i] = append(files[i], fmt.Sprintf("%s %q = %d\n", words[rng.IntN(len(words))], words[rng.IntN(len(words))], rng.IntN(1<<20)))
		}
	}
	var stream strings.Builder
	for i := range 300 {
		fmt.Fprintf(&stream, "commit refs/heads/main\ncommitter t <t@t> %d +0000\ndata 0\n", 1700000000+i)
		for j, lines := range files {
			if i != 0 && j != i%len(files) {
				continue
			}
			lines[rng.IntN(len(lines))] = fmt.Sprintf("# change %d\n", i)
			data := strings.Join(lines, "")
			fmt.Fprintf(&stream, "M 100644 inline f%02d.tf\ndata %d\n%s\n", j, len(data), data)
		}
		stream.WriteString("\n")
	}
	fastImport(t, work, stream.String())
	first = runGitT(t, work, "rev-list", "--max-parents=0", "main")
	filterBare(t, root, work, "repo.git")
	srv, c = stockGitServer(t, root)
	return srv, c, first
}

// fetchMeasured fetches ref from url with the production limits and
// returns the heap's growth during the fetch and the time it took.
func fetchMeasured(tb testing.TB, c *http.Client, url, ref, tmp string) (uint64, time.Duration) {
	f := &Fetcher{HTTP: c, Limits: productionLimits, TempDir: tmp}
	var err error
	start := time.Now()
	growth := heapGrowth(func() { _, err = f.Fetch(context.Background(), Address{Kind: KindGit, URL: url, Ref: ref}, io.Discard) })
	took := time.Since(start)
	if err != nil {
		tb.Fatalf("ref %s: %v", ref, err)
	}
	return growth, took
}

// A pack of 20,000 commit objects of 24 KiB each, as chains of 4,000
// offset deltas (some 800 KiB on the wire, declaring 470 MiB, within the
// default limits), fetched by branch or by abbreviated id: indexing and
// reading it hold a few of its objects at once, the heap growing by less
// than twice MemoryOverhead (GOGC). go-git's caches of delta bases, 96
// MiB each by default, its indexing's and its reading's, grew it by some
// 210 MiB per fetch (115 MiB with GOGC=10).
func TestFetchGitDeltaChainsMemory(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's shadow memory makes heap measures meaningless")
	}
	g := newDeltaChainGit(19_998, 4_000, 24<<10)
	t.Logf("pack of %d bytes", len(g.pack))
	srv := httptest.NewTLSServer(g)
	defer srv.Close()
	for _, ref := range []string{"main", g.first[:10]} {
		growth, took := fetchMeasured(t, srv.Client(), srv.URL+"/bomb.git", ref, t.TempDir())
		t.Logf("ref %s: heap grew by %.1f MiB, took %v", ref, float64(growth)/(1<<20), took)
		// Twice: the garbage collector lets the heap grow past what is
		// held (GOGC).
		if bound := uint64(2 * MemoryOverhead); growth > bound {
			t.Errorf("ref %s: the heap grew by %d MiB; want at most %d MiB", ref, growth>>20, bound>>20)
		}
	}
}

// BenchmarkFetchGitMemory reports the heap's growth (MiB) and the time
// of a fetch by branch and by abbreviated id, of the delta chains of
// TestFetchGitDeltaChainsMemory and of an honest repository.
func BenchmarkFetchGitMemory(b *testing.B) {
	g := newDeltaChainGit(19_998, 4_000, 24<<10)
	bomb := httptest.NewTLSServer(g)
	defer bomb.Close()
	honest, hc, first := honestGitRepo(b)
	for _, tc := range []struct {
		name, url, ref string
		c              *http.Client
	}{
		{"deltachains/main", bomb.URL + "/bomb.git", "main", bomb.Client()},
		{"deltachains/abbrev", bomb.URL + "/bomb.git", g.first[:10], bomb.Client()},
		{"honest/main", honest.URL + "/repo.git", "main", hc},
		{"honest/abbrev", honest.URL + "/repo.git", first[:10], hc},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var high uint64
			for b.Loop() {
				growth, _ := fetchMeasured(b, tc.c, tc.url, tc.ref, b.TempDir())
				high = max(high, growth)
			}
			b.ReportMetric(float64(high)/(1<<20), "heap-MiB")
		})
	}
}
