package modsource

import (
	"archive/zip"
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// heavy reports whether the full-size variants run (CI sets it).
func heavy() bool { return os.Getenv("TFMIRROR_HEAVY_TESTS") == "1" }

// heapGrowth runs fn and returns how far the heap in use (objects live or
// not yet swept) rose above what it was before fn, sampled every
// millisecond while fn runs by a goroutine that this call starts and
// stops.
func heapGrowth(fn func()) uint64 {
	const name = "/memory/classes/heap/objects:bytes"
	read := func(s []metrics.Sample) uint64 {
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	runtime.GC()
	base := read([]metrics.Sample{{Name: name}})
	stop, peak := make(chan struct{}), make(chan uint64)
	go func() {
		s := []metrics.Sample{{Name: name}}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		var high uint64
		for {
			high = max(high, read(s))
			select {
			case <-stop:
				peak <- max(high, read(s))
				return
			case <-tick.C:
			}
		}
	}()
	fn()
	close(stop)
	if p := <-peak; p > base {
		return p - base
	}
	return 0
}

// appendHex40 appends i as 40 hex digits, as an object id.
func appendHex40(b []byte, i uint64) []byte {
	var id [40]byte
	for k := range id {
		id[k] = '0'
	}
	hex.Encode(id[24:], binary.BigEndian.AppendUint64(nil, i))
	return append(b, id[:]...)
}

// flood writes the pkt-lines that line makes of 0, 1, 2, ... to w, in
// chunks of about 64 KiB, until about total bytes are sent or the client
// hangs up. It allocates nothing per line, so that the heap the fetch
// takes is what the heap grows by. sent counts the bytes written.
func flood(w io.Writer, total int64, sent *atomic.Int64, line func(b []byte, i uint64) []byte) {
	buf := make([]byte, 0, 64<<10+1<<10)
	var l [1 << 10]byte
	for i := uint64(0); sent.Load() < total; i++ {
		payload := line(l[:0], i)
		buf = fmt.Appendf(buf, "%04x", len(payload)+4)
		buf = append(buf, payload...)
		if len(buf) >= 64<<10 {
			n, err := w.Write(buf)
			sent.Add(int64(n))
			if err != nil {
				return
			}
			buf = buf[:0]
		}
	}
}

// gitObject is an object of a test pack: its type (1 commit, 2 tree,
// 3 blob) and content.
type gitObject struct {
	typ  byte
	data []byte
}

var gitTypeNames = map[byte]string{1: "commit", 2: "tree", 3: "blob"}

// id is the object's Git id.
func (o gitObject) id() []byte {
	h := sha1.New()
	fmt.Fprintf(h, "%s %d\x00", gitTypeNames[o.typ], len(o.data))
	h.Write(o.data)
	return h.Sum(nil)
}

// wholePack is a complete pack of objects, trailer included.
func wholePack(objects ...gitObject) []byte {
	var b bytes.Buffer
	b.WriteString("PACK")
	binary.Write(&b, binary.BigEndian, uint32(2))
	binary.Write(&b, binary.BigEndian, uint32(len(objects)))
	for _, o := range objects {
		size := uint64(len(o.data))
		c := o.typ<<4 | byte(size&0x0f)
		for size >>= 4; size != 0; size >>= 7 {
			b.WriteByte(c | 0x80)
			c = byte(size & 0x7f)
		}
		b.WriteByte(c)
		zw := zlib.NewWriter(&b)
		zw.Write(o.data)
		zw.Close()
	}
	sum := sha1.Sum(b.Bytes())
	b.Write(sum[:])
	return b.Bytes()
}

// superproject is a repository whose one commit holds a .gitmodules and
// the submodule "sub" at ./sub.git (relative to the repository's URL).
func superproject() (commit string, pack []byte) {
	gitmodules := gitObject{3, []byte("[submodule \"sub\"]\n\tpath = sub\n\turl = ./sub.git\n")}
	var tree bytes.Buffer
	tree.WriteString("100644 .gitmodules\x00")
	tree.Write(gitmodules.id())
	tree.WriteString("160000 sub\x00")
	subCommit, _ := hex.DecodeString(endlessCommit)
	tree.Write(subCommit)
	treeObj := gitObject{2, tree.Bytes()}
	c := gitObject{1, fmt.Appendf(nil, "tree %x\nauthor A <a@example.com> 0 +0000\ncommitter A <a@example.com> 0 +0000\n\nm\n", treeObj.id())}
	return hex.EncodeToString(c.id()), wholePack(c, treeObj, gitmodules)
}

// hostileGit is a Git smart-HTTP server that sends about total bytes of
// one part of the protocol (what), streamed, and a well-formed rest: the
// repository of oneTagGit, with the fakeGit field that writes that part
// set to a flood.
type hostileGit struct {
	what  string
	total int64
	sent  atomic.Int64
	done  chan struct{} // closed once the flood's sender has stopped
}

// The parts of the protocol that hostileGit floods.
const (
	floodAdvertisement = "ref advertisement"
	floodErrorPage     = "error page"
	floodShallowInfo   = "shallow-info lines"
	floodACK           = "ACK lines"
	floodSubmodule     = "a submodule's ref advertisement"
)

func (g *hostileGit) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	repo := oneTagGit(endlessCommit, nil)
	sub := strings.HasPrefix(r.URL.Path, "/parent.git/sub.git/")
	if g.what == floodSubmodule && !sub {
		repo.head, repo.pack = superproject()
	}
	// flooding writes about total bytes of lines made by line to w, then
	// says that the flood's sender has stopped.
	flooding := func(line func(b []byte, i uint64) []byte) func(w io.Writer) {
		return func(w io.Writer) {
			defer close(g.done)
			flood(w, g.total, &g.sent, line)
		}
	}
	switch {
	case g.what == floodErrorPage:
		flood := flooding(func(b []byte, i uint64) []byte {
			return append(b, "Authentication required. "...)
		})
		repo.refsPage = func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusUnauthorized)
			flood(w)
		}
	case g.what == floodAdvertisement || g.what == floodSubmodule && sub:
		repo.moreRefs = flooding(func(b []byte, i uint64) []byte {
			b = appendHex40(b, i)
			b = append(b, " refs/tags/v"...)
			return append(strconv.AppendUint(b, i, 10), '\n')
		})
	case g.what == floodShallowInfo:
		repo.moreShallow = flooding(func(b []byte, i uint64) []byte {
			return append(appendHex40(append(b, "shallow "...), i), '\n')
		})
	case g.what == floodACK:
		repo.moreAcks = flooding(func(b []byte, i uint64) []byte {
			return append(appendHex40(append(b, "ACK "...), i), '\n')
		})
	}
	repo.ServeHTTP(w, r)
}

// Every byte a Git source host sends counts against MaxDownloadBytes,
// whatever part of the protocol it is in: a fetch from a host that sends
// 300 MiB of it is refused after about the limit, the host stops sending
// soon after, and the heap grows by less than twice the limit plus
// MemoryOverhead while the fetch runs. An error page is read no further
// than its first KiB, for the error's text. With TFMIRROR_HEAVY_TESTS=1,
// the same with a limit of 64 MiB too, where the limit rather than the
// constant makes the bound.
func TestFetchGitCountsEveryByte(t *testing.T) {
	const total = 300 << 20
	limits := []int64{1 << 20}
	if heavy() {
		limits = append(limits, 64<<20)
	}
	for _, limit := range limits {
		for _, what := range []string{floodAdvertisement, floodErrorPage, floodShallowInfo, floodACK, floodSubmodule} {
			t.Run(fmt.Sprintf("%s, limit %d MiB", what, limit>>20), func(t *testing.T) {
				g := &hostileGit{what: what, total: total, done: make(chan struct{})}
				srv := httptest.NewTLSServer(g)
				defer srv.Close()
				limits := defaultLimits
				limits.MaxDownloadBytes = limit
				f := &Fetcher{HTTP: srv.Client(), Limits: limits, TempDir: t.TempDir()}
				a, err := Parse("git::" + srv.URL + "/parent.git?ref=v1")
				if err != nil {
					t.Fatal(err)
				}
				var fetchErr error
				growth := heapGrowth(func() { _, fetchErr = f.Fetch(context.Background(), a, io.Discard) })
				var le *LimitError
				switch {
				case what == floodErrorPage:
					if !errors.Is(fetchErr, ErrSource) || len(fetchErr.Error()) > 2<<10 {
						t.Fatalf("%d bytes of %s: %.3000v, want ErrSource and a short message", total, what, fetchErr)
					}
				case !errors.As(fetchErr, &le) || !strings.Contains(fetchErr.Error(), "bytes to download"):
					t.Fatalf("%d bytes of %s: %v, want a LimitError about the download", total, what, fetchErr)
				}
				select {
				case <-g.done:
				case <-time.After(time.Minute):
					t.Fatalf("the host was still sending a minute after the fetch gave up (%d bytes sent)", g.sent.Load())
				}
				sent := g.sent.Load()
				t.Logf("sent %d bytes of %d, heap grew by %d bytes", sent, total, growth)
				// What the kernel's socket buffers took besides the limit.
				if what != floodErrorPage && sent < limit || sent > limit+32<<20 {
					t.Errorf("the host sent %d bytes of %s; want about the %d-byte limit", sent, what, limit)
				}
				if bound := uint64(2*limit + MemoryOverhead); growth >= bound {
					t.Errorf("the heap grew by %d bytes during the fetch; want less than %d", growth, bound)
				}
			})
		}
	}
}

// zipStream is an honest zip of n empty stored files (names f0, f1, ...
// in base 36), each with its local header, then the central directory and
// the zip64 end records, made as it is read.
type zipStream struct {
	n      uint64
	i      uint64 // next entry, through both passes
	off    uint64 // of entry i's local header, in either pass
	dirOff uint64
	buf    []byte
	done   bool
}

func (z *zipStream) Read(p []byte) (int, error) {
	le := binary.LittleEndian
	for len(z.buf) < len(p) && !z.done {
		var name [16]byte
		switch {
		case z.i < z.n: // local headers
			nm := strconv.AppendUint(append(name[:0], 'f'), z.i, 36)
			z.buf = le.AppendUint32(z.buf, 0x04034b50)
			z.buf = le.AppendUint16(z.buf, 10)                        // version needed
			z.buf = append(z.buf, 0, 0, 0, 0, 0, 0, 0, 0)             // flags, method (stored), time, date
			z.buf = append(z.buf, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) // crc, sizes: empty
			z.buf = le.AppendUint16(z.buf, uint16(len(nm)))
			z.buf = le.AppendUint16(z.buf, 0)
			z.buf = append(z.buf, nm...)
			z.off += 30 + uint64(len(nm))
			z.i++
			if z.i == z.n {
				z.dirOff, z.off = z.off, 0
			}
		case z.i < 2*z.n: // central directory
			nm := strconv.AppendUint(append(name[:0], 'f'), z.i-z.n, 36)
			z.buf = le.AppendUint32(z.buf, 0x02014b50)
			z.buf = le.AppendUint16(z.buf, 20)            // made by
			z.buf = le.AppendUint16(z.buf, 10)            // needed
			z.buf = append(z.buf, 0, 0, 0, 0, 0, 0, 0, 0) // flags, method, time, date
			z.buf = append(z.buf, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
			z.buf = le.AppendUint16(z.buf, uint16(len(nm)))
			z.buf = append(z.buf, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) // extra, comment, disk, attributes
			z.buf = le.AppendUint32(z.buf, uint32(z.off))
			z.buf = append(z.buf, nm...)
			z.off += 30 + uint64(len(nm))
			z.i++
		default: // zip64 end record, its locator, the end record
			dirSize := uint64(46*z.n) + z.off - 30*z.n // the names once more
			z.buf = le.AppendUint32(z.buf, 0x06064b50)
			z.buf = le.AppendUint64(z.buf, 44)
			z.buf = le.AppendUint16(z.buf, 45)
			z.buf = le.AppendUint16(z.buf, 45)
			z.buf = append(z.buf, 0, 0, 0, 0, 0, 0, 0, 0)
			z.buf = le.AppendUint64(z.buf, z.n)
			z.buf = le.AppendUint64(z.buf, z.n)
			z.buf = le.AppendUint64(z.buf, dirSize)
			z.buf = le.AppendUint64(z.buf, z.dirOff)
			z.buf = le.AppendUint32(z.buf, 0x07064b50)
			z.buf = le.AppendUint32(z.buf, 0)
			z.buf = le.AppendUint64(z.buf, z.dirOff+dirSize)
			z.buf = le.AppendUint32(z.buf, 1)
			z.buf = le.AppendUint32(z.buf, 0x06054b50)
			z.buf = append(z.buf, 0, 0, 0, 0)
			z.buf = le.AppendUint16(z.buf, 0xffff)
			z.buf = le.AppendUint16(z.buf, 0xffff)
			z.buf = le.AppendUint32(z.buf, 0xffffffff)
			z.buf = le.AppendUint32(z.buf, 0xffffffff)
			z.buf = le.AppendUint16(z.buf, 0)
			z.done = true
		}
	}
	n := copy(p, z.buf)
	z.buf = z.buf[:copy(z.buf, z.buf[n:])]
	if n == 0 && z.done {
		return 0, io.EOF
	}
	return n, nil
}

func TestZipStreamIsAZip(t *testing.T) {
	data, err := io.ReadAll(&zipStream{n: 70_000})
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil || len(zr.File) != 70_000 {
		t.Fatalf("the test zip is not read as 70,000 entries: %v", err)
	}
	for _, i := range []int{0, 35, 36, 69_999} {
		zf := zr.File[i]
		rc, err := zf.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		if want := "f" + strconv.FormatUint(uint64(i), 36); err != nil || zf.Name != want || len(b) != 0 {
			t.Errorf("entry %d: %q (%d bytes, %v), want %q, empty", i, zf.Name, len(b), err, want)
		}
	}
}

// A zip's entries are counted from its end records before the zip
// package reads its directory (it makes room for every entry first): an
// honest zip of 3 million empty files (252 MiB, under the default
// --module-max-bytes) is refused by MaxEntries 20,000 with under 1 s of
// CPU (5 s with the race detector, which follows every byte the download
// copies), the heap growing by less than 64 MiB while the fetch runs.
// Without TFMIRROR_HEAVY_TESTS, 300,000 entries (24 MiB), whose directory
// would take 57 MiB of heap once read, with the heap growing by less than
// 16 MiB.
func TestFetchZipCountsEntriesFirst(t *testing.T) {
	entries, heapBound := uint64(300_000), uint64(16<<20)
	if heavy() {
		entries, heapBound = 3_000_000, 64<<20
	}
	// Made first, so that the CPU time measured is the fetch's.
	archive, err := os.Create(t.TempDir() + "/many.zip")
	if err != nil {
		t.Fatal(err)
	}
	defer archive.Close()
	if _, err := io.Copy(archive, &zipStream{n: entries}); err != nil {
		t.Fatal(err)
	}
	limits := Limits{MaxDownloadBytes: 256 << 20, MaxTreeBytes: 512 << 20, MaxEntries: 20_000}
	var opened atomic.Int64
	f := &Fetcher{
		Open: func(ctx context.Context, rawURL string) (io.ReadCloser, int64, error) {
			opened.Add(1)
			return io.NopCloser(io.NewSectionReader(archive, 0, 1<<62)), -1, nil
		},
		Limits:  limits,
		TempDir: t.TempDir(),
	}
	a, err := Parse("https://h.test/many.zip")
	if err != nil {
		t.Fatal(err)
	}
	var cpu time.Duration
	growth := heapGrowth(func() {
		start := cpuTime(t)
		_, err = f.Fetch(context.Background(), a, io.Discard)
		cpu = cpuTime(t) - start
	})
	t.Logf("%d entries: %v of CPU, heap grew by %d bytes", entries, cpu, growth)
	var le *LimitError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), fmt.Sprintf("%d entries", entries)) || opened.Load() != 1 {
		t.Fatalf("a zip of %d entries: %v, want a LimitError naming them", entries, err)
	}
	if bound := cpuScale * time.Second; cpu >= bound {
		t.Errorf("refusing it took %v of CPU; want under %v", cpu, bound)
	}
	if growth >= heapBound {
		t.Errorf("the heap grew by %d bytes while refusing it; want less than %d", growth, heapBound)
	}
}
