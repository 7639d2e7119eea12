package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

const testChunk = 1024

func openTest(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(Options{Dir: dir, InMemory: dir == "", ChunkSize: testChunk})
	if err != nil {
		t.Fatal(err)
	}
	s.waitCount()
	t.Cleanup(func() { s.Close() })
	return s
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func shaOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// put writes data through a BlobWriter in uneven pieces and commits it.
func put(t *testing.T, s *Store, data []byte) BlobInfo {
	t.Helper()
	w, err := s.NewBlobWriter(shaOf(data))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for rest := data; len(rest) > 0; {
		n := min(len(rest), 700)
		if _, err := w.Write(rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	info, err := w.Commit("h1:test")
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// chunkCount counts chunk keys in the database.
func chunkCount(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	err := s.db.bdb.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("c/")})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestMetaRoundTrip(t *testing.T) {
	s := openTest(t, "")
	type doc struct{ A string }
	before := time.Now().Add(-time.Second)
	if err := s.PutMeta("versions/x/a", doc{"one"}); err != nil {
		t.Fatal(err)
	}
	s.PutMeta("versions/x/b", doc{"two"})
	s.PutMeta("package/x/a/1.0.0", doc{"three"})

	var got doc
	at, err := s.GetMeta("versions/x/a", &got)
	if err != nil || got.A != "one" || at.Before(before) {
		t.Fatalf("GetMeta = %v at %v, %v", got, at, err)
	}
	if _, err := s.GetMeta("versions/missing", &got); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing key: %v, want ErrNotFound", err)
	}
	var keys []string
	s.ScanMeta("versions/", func(key string, _ time.Time, raw json.RawMessage) error {
		keys = append(keys, key+"="+string(raw))
		return nil
	})
	if fmt.Sprint(keys) != `[versions/x/a={"A":"one"} versions/x/b={"A":"two"}]` {
		t.Fatalf("ScanMeta = %v", keys)
	}
	// Stored again with its time of storing kept.
	stored := at.Add(-time.Hour)
	if err := s.PutMetaAt("versions/x/a", doc{"one again"}, stored); err != nil {
		t.Fatal(err)
	}
	if at, err := s.GetMeta("versions/x/a", &got); err != nil || got.A != "one again" || !at.Equal(stored) {
		t.Fatalf("after PutMetaAt at %v: GetMeta = %v at %v, %v", stored, got, at, err)
	}
	s.DeleteMeta("versions/x/a")
	if _, err := s.GetMeta("versions/x/a", &got); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	for _, bad := range []string{"", "a\x00b", string(make([]byte, 2000))} {
		if err := s.PutMeta(bad, doc{}); err == nil {
			t.Errorf("PutMeta(%q) succeeded", bad)
		}
	}
}

// PutMetas writes its documents all together or not at all: a write
// that fails part way (the disk, a document that cannot be encoded, a
// bad key) leaves none of them, and one that succeeds leaves each as
// PutMeta would.
func TestPutMetasAllOrNothing(t *testing.T) {
	var writes, failAt atomic.Int64
	s, err := Open(Options{InMemory: true, ChunkSize: testChunk, FailWrites: func() error {
		if n := writes.Add(1); n == failAt.Load() {
			return errors.New("no space left on device")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	s.waitCount()
	t.Cleanup(func() { s.Close() })
	type doc struct{ A string }
	docs := map[string]any{"oci/a": doc{"one"}, "oci/b": doc{"two"}, "oci/c": doc{"three"}}
	stored := func() (keys []string) {
		s.ScanMeta("oci/", func(key string, _ time.Time, _ json.RawMessage) error {
			keys = append(keys, key)
			return nil
		})
		return keys
	}
	for _, k := range []int64{1, 2, 3} {
		writes.Store(0)
		failAt.Store(k)
		if err := s.PutMetas(docs); err == nil {
			t.Fatalf("PutMetas with the write of document %d failing succeeded", k)
		}
		if keys := stored(); len(keys) != 0 {
			t.Fatalf("PutMetas failing at document %d left %q", k, keys)
		}
	}
	failAt.Store(0)
	for name, bad := range map[string]map[string]any{
		"a document that cannot be encoded": {"oci/a": doc{"one"}, "oci/b": make(chan int)},
		"a bad key":                         {"oci/a": doc{"one"}, "oci/\x00": doc{"two"}},
	} {
		if err := s.PutMetas(bad); err == nil {
			t.Errorf("PutMetas with %s succeeded", name)
		}
		if keys := stored(); len(keys) != 0 {
			t.Errorf("PutMetas with %s left %q", name, keys)
		}
	}
	if err := s.PutMetas(docs); err != nil {
		t.Fatal(err)
	}
	for key, want := range docs {
		var got doc
		if _, err := s.GetMeta(key, &got); err != nil || got != want {
			t.Errorf("GetMeta(%s) = %v, %v; want %v", key, got, err, want)
		}
	}
}

// ScanMetaAfter resumes a listing after a key, across read batches, and
// reads no further than its callback asks.
func TestScanMetaAfter(t *testing.T) {
	s := openTest(t, "")
	for i := range 600 {
		if err := s.PutMeta(fmt.Sprintf("package/p%03d", i), i); err != nil {
			t.Fatal(err)
		}
	}
	s.PutMeta("versions/x", 0)
	scan := func(prefix, after string, stop int) []string {
		var keys []string
		errStop := errors.New("stop")
		err := s.ScanMetaAfter(prefix, after, func(key string, _ time.Time, _ json.RawMessage) error {
			if len(keys) == stop {
				return errStop
			}
			keys = append(keys, key)
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			t.Fatal(err)
		}
		return keys
	}
	tests := []struct {
		name          string
		prefix, after string
		stop          int
		first, last   string
		n             int
	}{
		{"from the start", "package/", "", -1, "package/p000", "package/p599", 600},
		{"after a key", "package/", "package/p299", -1, "package/p300", "package/p599", 300},
		{"after a key that is not stored", "package/", "package/p299x", -1, "package/p300", "package/p599", 300},
		{"after a key before the prefix", "package/p5", "package/", -1, "package/p500", "package/p599", 100},
		{"after the last key", "package/", "package/p599", -1, "", "", 0},
		{"stopped by the callback", "package/", "package/p010", 3, "package/p011", "package/p013", 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keys := scan(tc.prefix, tc.after, tc.stop)
			if len(keys) != tc.n {
				t.Fatalf("%d keys, want %d: %v", len(keys), tc.n, keys)
			}
			if tc.n > 0 && (keys[0] != tc.first || keys[len(keys)-1] != tc.last) {
				t.Errorf("keys %s .. %s, want %s .. %s", keys[0], keys[len(keys)-1], tc.first, tc.last)
			}
			if !slices.IsSorted(keys) {
				t.Errorf("keys out of order")
			}
		})
	}
}

// decodeEnvelope reads every envelope as JSON does, those PutMeta writes
// and any other spelling.
func TestDecodeEnvelope(t *testing.T) {
	at := time.Date(2026, 11, 26, 7, 1, 2, 345000000, time.UTC)
	written := func(v any) string {
		raw, _ := json.Marshal(v)
		doc, _ := json.Marshal(envelope{StoredAt: at, Value: raw})
		return string(doc)
	}
	tests := []struct {
		name, val string
		wantErr   bool
	}{
		{"an object", written(map[string]any{"a": 1, "b": []string{"x"}}), false},
		{"a string that looks like an envelope's middle", written(`x","v":{"y`), false},
		{"a number", written(7), false},
		{"a time without fraction", `{"t":"2026-11-26T07:01:02Z","v":{"a":1}}`, false},
		{"a time with an offset", `{"t":"2026-11-26T08:01:02+01:00","v":[1,2]}`, false},
		{"fields the other way round", `{"v":{"a":1},"t":"2026-11-26T07:01:02Z"}`, false},
		{"spaces", `{ "t": "2026-11-26T07:01:02Z", "v": {"a": 1} }`, false},
		{"no time", `{"v":{"a":1}}`, false},
		{"a time that is not one", `{"t":"yesterday","v":1}`, true},
		{"cut short", `{"t":"2026-11-26T07:01:02Z","v":`, true},
		{"not JSON", `nonsense`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got, want envelope
			err := decodeEnvelope([]byte(tc.val), &got)
			wantErr := json.Unmarshal([]byte(tc.val), &want)
			if (err != nil) != tc.wantErr || (wantErr != nil) != tc.wantErr {
				t.Fatalf("decodeEnvelope: %v, json.Unmarshal: %v; want an error: %v", err, wantErr, tc.wantErr)
			}
			if err != nil {
				return
			}
			if !got.StoredAt.Equal(want.StoredAt) {
				t.Errorf("stored at %v, want %v", got.StoredAt, want.StoredAt)
			}
			var g, w any
			if json.Unmarshal(got.Value, &g) != nil || json.Unmarshal(want.Value, &w) != nil || !reflect.DeepEqual(g, w) {
				t.Errorf("document %s, want %s", got.Value, want.Value)
			}
		})
	}
}

// ScanBlobs gives every committed archive once, in sha256 order, across
// its batches, and stops when the callback says so.
func TestScanBlobs(t *testing.T) {
	s := openTest(t, "")
	want := map[string]int64{}
	for i := range scanBatch + 44 {
		info := put(t, s, randomBytes(1+i%3, uint64(i)+1))
		want[info.SHA256] = info.Size
	}
	got := map[string]int64{}
	var order []string
	if err := s.ScanBlobs(func(sha string, size int64) error {
		if _, dup := got[sha]; dup {
			t.Errorf("%s given twice", sha)
		}
		got[sha] = size
		order = append(order, sha)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Errorf("ScanBlobs gave %d archives, want the %d committed (or with other sizes)", len(got), len(want))
	}
	if !slices.IsSorted(order) {
		t.Error("archives out of order")
	}
	errStop := errors.New("stop")
	n := 0
	err := s.ScanBlobs(func(string, int64) error {
		if n++; n == 3 {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) || n != 3 {
		t.Errorf("stopped after %d archives with %v; want 3, the callback's error", n, err)
	}
}

func TestBlobRoundTrip(t *testing.T) {
	sizes := map[string]int{
		"empty": 0, "one byte": 1, "chunk minus one": testChunk - 1, "one chunk": testChunk,
		"chunk plus one": testChunk + 1, "three and a half chunks": testChunk*3 + testChunk/2,
	}
	s := openTest(t, "")
	for name, size := range sizes {
		t.Run(name, func(t *testing.T) {
			data := randomBytes(size, uint64(size)+1)
			info := put(t, s, data)
			if info.Size != int64(size) || info.SHA256 != shaOf(data) || info.H1 != "h1:test" {
				t.Fatalf("info %+v", info)
			}
			b, err := s.OpenBlob(shaOf(data))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			got, err := io.ReadAll(b)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("Read: %d bytes, %v", len(got), err)
			}
			// Reads across chunk boundaries at every offset class.
			for _, off := range []int{0, 1, testChunk - 2, testChunk, size / 2, max(0, size-3)} {
				if off > size {
					continue
				}
				p := make([]byte, min(testChunk+5, size-off))
				n, err := b.ReadAt(p, int64(off))
				if n != len(p) || (err != nil && err != io.EOF) || !bytes.Equal(p, data[off:off+n]) {
					t.Fatalf("ReadAt(%d): n=%d err=%v", off, n, err)
				}
			}
			if _, err := b.Seek(int64(size/3), io.SeekStart); err != nil {
				t.Fatal(err)
			}
			rest, _ := io.ReadAll(b)
			if !bytes.Equal(rest, data[size/3:]) {
				t.Fatal("Seek then Read differs")
			}
		})
	}
	if n, total := s.Stats(); n != len(sizes) {
		t.Errorf("Stats = %d archives, %d bytes", n, total)
	}
}

func TestFollowersReadAnywhereWhileWriting(t *testing.T) {
	s := openTest(t, "")
	data := randomBytes(testChunk*20+123, 7)
	w, err := s.NewBlobWriter(shaOf(data))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	errs := make(chan error, 8)
	readers := 8
	var rw sync.WaitGroup
	stop := make(chan struct{})
	for r := range readers {
		rw.Add(1)
		go func() {
			defer rw.Done()
			rnd := rand.New(rand.NewPCG(uint64(r), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := w.Written()
				if n == 0 {
					continue
				}
				off := rnd.Int64N(n)
				l := min(n-off, int64(rnd.IntN(3*testChunk)+1))
				p := make([]byte, l)
				got, err := followAt(w, p, off)
				if err != nil || int64(got) != l || !bytes.Equal(p, data[off:off+l]) {
					errs <- fmt.Errorf("ReadAt(%d, %d) = %d, %v", off, l, got, err)
					return
				}
			}
		}()
	}
	writeInPiecesAndCommit(t, w, data)
	// Reading through a follower still works after Commit.
	p := make([]byte, len(data))
	if n, err := followAt(w, p, 0); n != len(data) || err != nil || !bytes.Equal(p, data) {
		t.Fatalf("a follower's read after commit: %d, %v", n, err)
	}
	close(stop)
	rw.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

func TestFailedWritesLeaveNothing(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, s *Store, data []byte) error
	}{
		{"digest mismatch", func(t *testing.T, s *Store, data []byte) error {
			w, _ := s.NewBlobWriter(shaOf(data))
			defer w.Close()
			tampered := bytes.Clone(data)
			tampered[len(tampered)-1] ^= 1
			w.Write(tampered)
			_, err := w.Commit("")
			if !errors.Is(err, ErrDigestMismatch) {
				t.Errorf("Commit = %v, want ErrDigestMismatch", err)
			}
			return err
		}},
		{"abort", func(t *testing.T, s *Store, data []byte) error {
			w, _ := s.NewBlobWriter(shaOf(data))
			w.Write(data)
			w.Abort()
			return w.Close()
		}},
		{"close without commit", func(t *testing.T, s *Store, data []byte) error {
			w, _ := s.NewBlobWriter(shaOf(data))
			w.Write(data)
			return w.Close()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t, "")
			data := randomBytes(testChunk*3+10, 3)
			tc.run(t, s, data)
			if _, err := s.StatBlob(shaOf(data)); !errors.Is(err, ErrNotFound) {
				t.Errorf("StatBlob = %v, want ErrNotFound", err)
			}
			if n := chunkCount(t, s); n != 0 {
				t.Errorf("%d chunks left behind", n)
			}
			if n, _ := s.Stats(); n != 0 {
				t.Errorf("Stats counts %d archives", n)
			}
		})
	}
}

func TestDedupe(t *testing.T) {
	s := openTest(t, "")
	data := randomBytes(testChunk*2+1, 9)
	first := put(t, s, data)
	second := put(t, s, data)
	if second.Created != first.Created {
		t.Error("second commit replaced the first")
	}
	if n := chunkCount(t, s); n != 3 {
		t.Errorf("%d chunks stored, want 3 (one copy)", n)
	}
	if n, total := s.Stats(); n != 1 || total != int64(len(data)) {
		t.Errorf("Stats = %d, %d", n, total)
	}
}

func TestRestartAndOrphanCleanup(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, ChunkSize: testChunk})
	if err != nil {
		t.Fatal(err)
	}
	kept := randomBytes(testChunk*4+5, 11)
	put(t, s, kept)
	s.PutMeta("versions/a", map[string]int{"x": 1})
	// A write interrupted by a crash: chunks staged, never committed nor closed.
	interrupted := randomBytes(testChunk*3, 12)
	w, _ := s.NewBlobWriter(shaOf(interrupted))
	w.Write(interrupted)
	if got := chunkCount(t, s); got != 5+3 {
		t.Fatalf("%d chunks before restart", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2, err := Open(Options{Dir: dir, ChunkSize: testChunk})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	s2.waitCount() // the clean-up follows the count, in the background
	if n, total := s2.Stats(); n != 1 || total != int64(len(kept)) {
		t.Errorf("Stats after restart = %d, %d", n, total)
	}
	if _, err := s2.StatBlob(shaOf(interrupted)); !errors.Is(err, ErrNotFound) {
		t.Errorf("interrupted archive visible after restart: %v", err)
	}
	if got := chunkCount(t, s2); got != 5 {
		t.Errorf("%d chunks after restart, want 5 (orphans removed)", got)
	}
	b, err := s2.OpenBlob(shaOf(kept))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got, _ := io.ReadAll(b)
	if !bytes.Equal(got, kept) {
		t.Error("archive differs after restart")
	}
	var m map[string]int
	if _, err := s2.GetMeta("versions/a", &m); err != nil || m["x"] != 1 {
		t.Errorf("metadata after restart: %v %v", m, err)
	}
	if err := s2.Ping(); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

func TestStagingFailureStillServesBytes(t *testing.T) {
	s := openTest(t, "")
	calls := 0
	s.Blobs.failWrites = func() error {
		calls++
		if calls >= 2 {
			return errors.New("no space left on device")
		}
		return nil
	}
	data := randomBytes(testChunk*4+77, 13)
	w, err := s.NewBlobWriter(shaOf(data))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if n, err := w.Write(data); n != len(data) || err != nil {
		t.Fatalf("Write = %d, %v; a storage failure must not fail the stream", n, err)
	}
	if w.Err() == nil {
		t.Fatal("Err() = nil after a staging failure")
	}
	p := make([]byte, len(data))
	if n, err := followAt(w, p, 0); n != len(data) || err != nil || !bytes.Equal(p, data) {
		t.Fatalf("ReadAt = %d, %v", n, err)
	}
	if _, err := w.Commit(""); err == nil {
		t.Fatal("Commit succeeded after a staging failure")
	}
	if _, err := s.StatBlob(shaOf(data)); !errors.Is(err, ErrNotFound) {
		t.Errorf("StatBlob = %v", err)
	}
	// Clients still streaming from the writer get every byte until Close.
	clear(p)
	if n, err := followAt(w, p, 0); n != len(data) || err != nil || !bytes.Equal(p, data) {
		t.Fatalf("ReadAt after the failed Commit = %d, %v", n, err)
	}
	w.Close()
	if n := chunkCount(t, s); n != 0 {
		t.Errorf("%d chunks left behind", n)
	}
}

func TestUnstagedMemoryIsBounded(t *testing.T) {
	// The disk is full; the store may hold three chunks in memory in all.
	s, err := Open(Options{InMemory: true, ChunkSize: testChunk, MaxUnstagedBytes: 3 * testChunk,
		FailWrites: func() error { return errors.New("no space left on device") }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	// The first download keeps its first two chunks.
	a := randomBytes(testChunk*2+10, 21)
	wa, _ := s.NewBlobWriter(shaOf(a))
	defer wa.Close()
	wa.Write(a)
	// The second download keeps its first chunk within the limit and its
	// newest finished one (chunk 3) over it; chunks 1 and 2 are dropped.
	b := randomBytes(testChunk*4+10, 22)
	wb, _ := s.NewBlobWriter(shaOf(b))
	defer wb.Close()
	wb.Write(b)

	p := make([]byte, len(a))
	if n, err := followAt(wa, p, 0); n != len(a) || err != nil || !bytes.Equal(p, a) {
		t.Fatalf("first download: ReadAt = %d, %v; want every byte", n, err)
	}
	p = make([]byte, testChunk)
	if n, err := followAt(wb, p, 0); n != testChunk || err != nil || !bytes.Equal(p, b[:testChunk]) {
		t.Fatalf("second download, kept chunk: ReadAt = %d, %v", n, err)
	}
	if n, err := followAt(wb, p, testChunk+5); !errors.Is(err, ErrChunkDropped) || n != 0 {
		t.Fatalf("second download, dropped chunk: ReadAt = %d, %v; want ErrChunkDropped", n, err)
	}
	// Reading across the boundary returns what was kept, then the error.
	p = make([]byte, 20)
	if n, err := followAt(wb, p, testChunk-10); n != 10 || !errors.Is(err, ErrChunkDropped) || !bytes.Equal(p[:10], b[testChunk-10:testChunk]) {
		t.Fatalf("across the boundary: ReadAt = %d, %v", n, err)
	}
	// The newest finished chunk and the one being filled are still
	// readable: readers at the front, and the final bytes clients are
	// held back on, are not affected.
	p = make([]byte, testChunk+10)
	if n, err := followAt(wb, p, testChunk*3); n != len(p) || err != nil || !bytes.Equal(p, b[testChunk*3:]) {
		t.Fatalf("newest chunk: ReadAt = %d, %v", n, err)
	}
	p = make([]byte, 10)
	if n, err := followAt(wb, p, testChunk*4); n != 10 || err != nil || !bytes.Equal(p, b[testChunk*4:]) {
		t.Fatalf("current chunk: ReadAt = %d, %v", n, err)
	}
	if wb.Written() != int64(len(b)) || wb.Sum() != shaOf(b) {
		t.Fatal("the download must go on whole (written bytes and sha256) when chunks are dropped")
	}

	// Closing the first download returns its memory: a third keeps two chunks.
	wa.Close()
	c := randomBytes(testChunk*2+1, 23)
	wc, _ := s.NewBlobWriter(shaOf(c))
	defer wc.Close()
	wc.Write(c)
	p = make([]byte, len(c))
	if n, err := followAt(wc, p, 0); n != len(c) || err != nil || !bytes.Equal(p, c) {
		t.Fatalf("after the first download closed: ReadAt = %d, %v; want every byte", n, err)
	}
	// Aborting returns memory too.
	wc.Abort()
	wb.Close()
	s.writers.mu.Lock()
	held := s.writers.unstaged
	s.writers.mu.Unlock()
	if held != 0 {
		t.Fatalf("%d unstaged bytes still accounted after every writer ended", held)
	}
}

func TestDeleteBlob(t *testing.T) {
	s := openTest(t, "")
	data := randomBytes(testChunk*2, 5)
	put(t, s, data)
	if err := s.DeleteBlob(shaOf(data)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OpenBlob(shaOf(data)); !errors.Is(err, ErrNotFound) {
		t.Errorf("OpenBlob after delete: %v", err)
	}
	if n := chunkCount(t, s); n != 0 {
		t.Errorf("%d chunks left", n)
	}
	if n, total := s.Stats(); n != 0 || total != 0 {
		t.Errorf("Stats = %d, %d", n, total)
	}
	if _, err := s.StatBlob("NOT-A-SHA"); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("invalid sha: %v", err)
	}
}

func BenchmarkBlobRead(b *testing.B) {
	s, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	data := randomBytes(64<<20, 1)
	sha := shaOf(data)
	w, _ := s.NewBlobWriter(sha)
	w.Write(data)
	if _, err := w.Commit(""); err != nil {
		b.Fatal(err)
	}
	w.Close()
	b.SetBytes(int64(len(data)))
	buf := make([]byte, 32<<10)
	for b.Loop() {
		blob, _ := s.OpenBlob(sha)
		if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{blob}, buf); err != nil {
			b.Fatal(err)
		}
		blob.Close()
	}
}

// BenchmarkFollowerRead is a client behind a download in progress: the
// archive's bytes are written and staged, not committed, and the client
// reads them from the start in pieces of 32 KiB (as the HTTP server copies
// a response) and of 4 KiB (as a zip's decompressor reads the archive
// check's): through a Follower, and for comparison as every read did
// before there were Followers, checking the whole stored chunk it reads
// from at each read (readEachTime).
func BenchmarkFollowerRead(b *testing.B) {
	s, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	data := randomBytes(64<<20, 1)
	w, err := s.NewBlobWriter(shaOf(data))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	w.Write(data)
	for _, size := range []int{32 << 10, 4 << 10} {
		buf := make([]byte, size)
		read := func(b *testing.B, r io.ReaderAt) {
			b.Helper()
			sr := io.NewSectionReader(r, 0, int64(len(data)))
			if _, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, struct{ io.Reader }{sr}, buf); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("Follow/%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				f := w.Follow()
				read(b, f)
				f.Close()
			}
		})
		b.Run(fmt.Sprintf("EachRead/%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				read(b, readEachTime{w.(*blobWriter)})
			}
		})
	}
}

// readEachTime reads what w has written as every read did before there
// were Followers: each read of a stored chunk checks the whole chunk.
type readEachTime struct{ w *blobWriter }

func (r readEachTime) ReadAt(p []byte, off int64) (int, error) {
	return r.w.readAt(p, off, func(idx, inChunk int, p []byte, sum uint64) (int, error) {
		return r.w.s.readChunk(r.w.expected, r.w.stage, idx, inChunk, p, sum)
	})
}
