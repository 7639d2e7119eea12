package cache

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// Clients behind a download, each through a Follower of its own, read
// what was written in small pieces, forwards and back, while it is
// written, staged and committed, and get the archive's bytes.
func TestFollowersReadWhileWriting(t *testing.T) {
	s := openTest(t, t.TempDir())
	data := randomBytes(testChunk*20+123, 9)
	w, err := s.NewBlobWriter(shaOf(data))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	const followers = 8
	errs := make(chan error, followers)
	var wg sync.WaitGroup
	for r := range followers {
		wg.Go(func() {
			f := w.Follow()
			defer f.Close()
			rnd := rand.New(rand.NewPCG(uint64(r), 2))
			var off int64
			for off < int64(len(data)) {
				n := w.Written()
				if n <= off {
					continue
				}
				l := min(n-off, int64(rnd.IntN(testChunk/3)+1))
				p := make([]byte, l)
				if got, err := f.ReadAt(p, off); err != nil || int64(got) != l || !bytes.Equal(p, data[off:off+l]) {
					errs <- fmt.Errorf("follower %d: ReadAt(%d, %d) = %d, %v", r, off, l, got, err)
					return
				}
				off += l
				if rnd.IntN(8) == 0 { // and now and then a piece read before
					back := rnd.Int64N(off)
					p := p[:min(l, off-back)]
					if got, err := f.ReadAt(p, back); err != nil || !bytes.Equal(p, data[back:back+int64(len(p))]) {
						errs <- fmt.Errorf("follower %d: ReadAt(%d, %d) back = %d, %v", r, back, len(p), got, err)
						return
					}
				}
			}
		})
	}
	writeInPiecesAndCommit(t, w, data)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A stored chunk of a download in progress whose bytes no longer have
// the checksum written with them is never read as the archive's through
// a Follower, however it is read: every read of it fails with
// ErrDamaged, and the chunks around it are read as they are.
func TestFollowerChecksTheStoredChunks(t *testing.T) {
	s := openTest(t, t.TempDir())
	data := randomBytes(testChunk*5+100, 10)
	bw, err := s.NewBlobWriter(shaOf(data))
	if err != nil {
		t.Fatal(err)
	}
	defer bw.Close()
	bw.Write(data)
	w := bw.(*blobWriter)
	if w.staged != 5 {
		t.Fatalf("%d chunks staged, want 5", w.staged)
	}
	altered := bytes.Clone(data[2*testChunk : 3*testChunk])
	altered[17] ^= 0xff
	if err := s.db.update(0, func(txn *badger.Txn) error { return txn.Set(chunkKey(w.stage, 2), altered) }); err != nil {
		t.Fatal(err)
	}

	f := w.Follow()
	defer f.Close()
	p := make([]byte, 100)
	for _, off := range []int64{testChunk + 10, 3*testChunk + 10, 5 * testChunk} {
		if n, err := f.ReadAt(p, off); err != nil || !bytes.Equal(p[:n], data[off:off+int64(n)]) || n != len(p) {
			t.Fatalf("ReadAt(%d) of an intact chunk: %d, %v", off, n, err)
		}
	}
	for _, off := range []int64{2*testChunk + 500, 2 * testChunk, 2*testChunk - 50} {
		n, err := f.ReadAt(p, off)
		if !errors.Is(err, ErrDamaged) {
			t.Fatalf("ReadAt(%d) of the altered chunk: %d, %v; want ErrDamaged", off, n, err)
		}
		if want := max(0, 2*testChunk-off); int64(n) != want || !bytes.Equal(p[:n], data[off:off+int64(n)]) {
			t.Fatalf("ReadAt(%d) of the altered chunk read %d bytes, want the %d before it", off, n, want)
		}
	}
	if _, err := followAt(w, p, 2*testChunk+500); !errors.Is(err, ErrDamaged) {
		t.Fatalf("another follower's read of the altered chunk: %v, want ErrDamaged", err)
	}
}

// A Follower reads nothing once the download is aborted, or once it is
// closed itself; closing it again is no error.
func TestFollowerEnds(t *testing.T) {
	s := openTest(t, t.TempDir())
	data := randomBytes(testChunk*3, 11)
	w, err := s.NewBlobWriter(shaOf(data))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Write(data)
	f, g := w.Follow(), w.Follow()
	p := make([]byte, 10)
	if _, err := f.ReadAt(p, testChunk); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("closing a closed follower: %v", err)
	}
	if _, err := f.ReadAt(p, testChunk); err == nil {
		t.Fatal("a closed follower read")
	}
	if _, err := g.ReadAt(p, testChunk); err != nil {
		t.Fatal(err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if n, err := g.ReadAt(p, testChunk); err == nil || err == io.EOF {
		t.Fatalf("a follower of an aborted download read %d bytes (%v)", n, err)
	}
	g.Close()
}

// followAt reads p at off from what w has written, through a Follower
// of its own, as one client's read.
func followAt(w BlobWriter, p []byte, off int64) (int, error) {
	f := w.Follow()
	defer f.Close()
	return f.ReadAt(p, off)
}

// writeInPiecesAndCommit writes data to w in pieces of 333 bytes, as a
// download arrives, and commits it.
func writeInPiecesAndCommit(t *testing.T, w BlobWriter, data []byte) {
	t.Helper()
	for rest := data; len(rest) > 0; {
		n := min(len(rest), 333)
		w.Write(rest[:n])
		rest = rest[n:]
	}
	if _, err := w.Commit(""); err != nil {
		t.Fatal(err)
	}
}

// The chunk a download stored last stays in memory until the next one is
// stored: the readers close behind the download, the most of its clients,
// read it there, as they read the chunk being filled, not each through a
// buffer of its own. Older chunks are read where they are stored, and
// checked.
func TestLastStoredChunkReadFromMemory(t *testing.T) {
	s := openTest(t, t.TempDir())
	data := randomBytes(testChunk*5, 12)
	bw, err := s.NewBlobWriter(shaOf(data))
	if err != nil {
		t.Fatal(err)
	}
	defer bw.Close()
	w := bw.(*blobWriter)
	bw.Write(data[:3*testChunk+100]) // chunks 0 to 2 stored, 3 being filled
	alter := func(idx int) {
		t.Helper()
		altered := bytes.Clone(data[idx*testChunk : (idx+1)*testChunk])
		altered[5] ^= 0xff
		if err := s.db.update(0, func(txn *badger.Txn) error { return txn.Set(chunkKey(w.stage, idx), altered) }); err != nil {
			t.Fatal(err)
		}
	}
	alter(1)
	alter(2)
	read := func(idx int) error {
		p := make([]byte, 10)
		off := int64(idx*testChunk + 1)
		n, err := followAt(bw, p, off)
		if err == nil && (n != len(p) || !bytes.Equal(p, data[off:off+10])) {
			t.Fatalf("chunk %d: read %d bytes that are not the archive's", idx, n)
		}
		return err
	}
	if err := read(2); err != nil {
		t.Fatalf("the chunk stored last, kept in memory: %v", err)
	}
	if err := read(1); !errors.Is(err, ErrDamaged) {
		t.Fatalf("an older stored chunk, altered: %v, want ErrDamaged", err)
	}
	bw.Write(data[3*testChunk+100:]) // chunk 3 stored, 4 filled and stored
	if err := read(2); !errors.Is(err, ErrDamaged) {
		t.Fatalf("chunk 2 once others were stored after it: %v, want ErrDamaged (read where it is stored)", err)
	}
	if err := read(4); err != nil {
		t.Fatalf("the chunk stored last: %v", err)
	}
}

// BenchmarkHeldBackClients is the clients of a download held back on its
// last bytes until it verified: 300 of them, each with a Follower it
// keeps until its response ends, read the last 64 KiB of a 1 MiB archive
// once its one chunk is stored. MiB-held is the heap they hold between
// them once all have read, measured once after the timed loop.
func BenchmarkHeldBackClients(b *testing.B) {
	s, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	data := randomBytes(DefaultChunkSize, 13)
	w, err := s.NewBlobWriter(shaOf(data))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	w.Write(data) // the chunk is full: it is stored
	const clients = 300
	p := make([]byte, 64<<10)
	followers := make([]Follower, clients)
	readAll := func() {
		for i := range followers {
			followers[i] = w.Follow()
			if _, err := followers[i].ReadAt(p, int64(len(data)-len(p))); err != nil {
				b.Fatal(err)
			}
		}
	}
	closeAll := func() {
		for _, f := range followers {
			f.Close()
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		readAll()
		closeAll()
	}
	b.StopTimer()
	var before, held runtime.MemStats
	runtime.GC()
	runtime.GC() // the pooled buffers too
	runtime.ReadMemStats(&before)
	readAll()
	runtime.ReadMemStats(&held)
	closeAll()
	b.ReportMetric(float64(int64(held.HeapInuse)-int64(before.HeapInuse))/(1<<20), "MiB-held")
}
