package cache

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"testing"
	"time"
)

func openLimited(t *testing.T, dir string, maxBytes int64, evicted *[]string) *Store {
	t.Helper()
	var mu sync.Mutex
	s, err := Open(Options{Dir: dir, InMemory: dir == "", ChunkSize: testChunk, MaxBytes: maxBytes,
		OnEvict: recordEvictions(&mu, evicted)})
	if err != nil {
		t.Fatal(err)
	}
	s.waitCount()
	t.Cleanup(func() { s.Close() })
	return s
}

// recordEvictions is an Options.OnEvict that appends each archive it is
// told of to evicted, holding mu (for a test to read evicted under).
func recordEvictions(mu *sync.Mutex, evicted *[]string) func(BlobInfo) {
	return func(b BlobInfo) {
		mu.Lock()
		defer mu.Unlock()
		*evicted = append(*evicted, b.SHA256)
	}
}

// settle waits until the eviction goroutine has run a pass after every
// kick so far.
func (s *Store) settle() {
	if s.evict.done == nil {
		return
	}
	done := make(chan struct{})
	s.evict.flush <- done
	<-done
}

func cached(s *Store, data []byte) bool {
	_, err := s.StatBlob(shaOf(data))
	return err == nil
}

func readBlob(t *testing.T, s *Store, data []byte) {
	t.Helper()
	b, err := s.OpenBlob(shaOf(data))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got, err := io.ReadAll(b)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("reading blob: %v", err)
	}
}

func TestEvictionLeastRecentlyUsed(t *testing.T) {
	const size = testChunk * 3
	tests := []struct {
		name     string
		touch    []int // blobs read after all four were written
		wantGone []int
	}{
		{name: "oldest commit goes first", wantGone: []int{0}},
		{name: "a read makes a blob recent", touch: []int{0}, wantGone: []int{1}},
		{name: "reads in order", touch: []int{1, 0, 2}, wantGone: []int{3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var evicted []string
			// Room for four archives; the fifth forces one out.
			s := openLimited(t, "", 4*size, &evicted)
			var blobs [][]byte
			for i := range 4 {
				blobs = append(blobs, randomBytes(size, uint64(100+i)))
				put(t, s, blobs[i])
			}
			for _, i := range tc.touch {
				readBlob(t, s, blobs[i])
			}
			if len(evicted) != 0 {
				t.Fatalf("evicted %d archives while under the limit", len(evicted))
			}
			extra := randomBytes(size, 200)
			put(t, s, extra)
			s.settle()
			gone := map[int]bool{}
			for _, i := range tc.wantGone {
				gone[i] = true
			}
			for i, b := range blobs {
				if cached(s, b) == gone[i] {
					t.Errorf("blob %d cached = %v, want %v", i, cached(s, b), !gone[i])
				}
			}
			if !cached(s, extra) {
				t.Error("the archive just committed was evicted")
			}
			if len(evicted) != len(tc.wantGone) || evicted[0] != shaOf(blobs[tc.wantGone[0]]) {
				t.Errorf("OnEvict saw %d archives, want %d", len(evicted), len(tc.wantGone))
			}
			if n, total := s.Stats(); n != 4 || total != 4*size {
				t.Errorf("Stats after eviction = %d, %d; want 4, %d", n, total, 4*size)
			}
			if n, err := s.ChunkCount(); err != nil || n != 4*3 {
				t.Errorf("ChunkCount = %d, %v; want 12 (evicted chunks deleted)", n, err)
			}
		})
	}
}

func TestEvictionSkipsBlobsInUse(t *testing.T) {
	const size = testChunk * 2
	var evicted []string
	s := openLimited(t, "", 2*size, &evicted)
	a, b, c := randomBytes(size, 1), randomBytes(size, 2), randomBytes(size, 3)
	put(t, s, a)
	put(t, s, b)
	reader, err := s.OpenBlob(shaOf(a)) // a is open: b is now the oldest unused one
	if err != nil {
		t.Fatal(err)
	}
	readBlob(t, s, b) // b is more recent than a, but a is open
	put(t, s, c)
	s.settle()
	if !cached(s, a) || cached(s, b) || !cached(s, c) {
		t.Fatalf("cached a, b, c = %v %v %v; want the open blob a kept and b evicted", cached(s, a), cached(s, b), cached(s, c))
	}
	got, err := io.ReadAll(reader)
	if err != nil || !bytes.Equal(got, a) {
		t.Fatalf("reading the open blob after an eviction pass: %v", err)
	}

	// With everything in use the cache may go over its limit; the excess
	// is evicted as soon as a reader lets go.
	reader2, err := s.OpenBlob(shaOf(c))
	if err != nil {
		t.Fatal(err)
	}
	d := randomBytes(size, 4)
	w, err := s.NewBlobWriter(shaOf(d))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(d)
	if _, err := w.Commit(""); err != nil {
		t.Fatal(err)
	}
	s.settle()
	// a and c are open and d's writer is not closed: nothing can go.
	if n, total := s.Stats(); n != 3 || total != 3*size {
		t.Fatalf("Stats = %d, %d; want 3 archives over the limit while all are in use", n, total)
	}
	p := make([]byte, len(d))
	if n, err := followAt(w, p, 0); n != len(d) || err != nil || !bytes.Equal(p, d) {
		t.Fatalf("a follower's read after commit = %d, %v", n, err)
	}
	reader.Close() // a is the least recently used and now free
	s.settle()
	if cached(s, a) || !cached(s, c) || !cached(s, d) {
		t.Errorf("after closing a: cached a, c, d = %v %v %v; want a evicted", cached(s, a), cached(s, c), cached(s, d))
	}
	if n, total := s.Stats(); n != 2 || total != 2*size {
		t.Errorf("Stats = %d, %d; want 2, %d", n, total, 2*size)
	}
	reader2.Close()
	w.Close()
	s.settle()
	if len(evicted) != 2 {
		t.Errorf("OnEvict called %d times, want 2", len(evicted))
	}
	if _, err := s.OpenBlob(shaOf(a)); !errors.Is(err, ErrNotFound) {
		t.Errorf("OpenBlob of an evicted archive: %v", err)
	}
}

func TestEvictionAtOpenAndUnlimited(t *testing.T) {
	const size = testChunk * 2
	dir := t.TempDir()
	var none []string
	s := openLimited(t, dir, 0, &none)
	var blobs [][]byte
	for i := range 8 {
		blobs = append(blobs, randomBytes(size, uint64(10+i)))
		put(t, s, blobs[i])
	}
	if n, _ := s.Stats(); n != 8 || len(none) != 0 {
		t.Fatalf("unlimited cache holds %d archives, evicted %d", n, len(none))
	}
	s.Close()

	// Reopened with a smaller limit, the oldest commits go first, whatever
	// the (random) order of their keys.
	var evicted []string
	s2 := openLimited(t, dir, 2*size, &evicted)
	s2.settle()
	if n, total := s2.Stats(); n != 2 || total != 2*size {
		t.Errorf("Stats after reopening with a limit = %d, %d", n, total)
	}
	if !cached(s2, blobs[6]) || !cached(s2, blobs[7]) || len(evicted) != 6 {
		t.Errorf("kept the wrong archives: last two cached = %v %v, evicted %d", cached(s2, blobs[6]), cached(s2, blobs[7]), len(evicted))
	}
	readBlob(t, s2, blobs[7])
}

func TestFailWrites(t *testing.T) {
	var mu sync.Mutex
	failing := true
	s, err := Open(Options{InMemory: true, ChunkSize: testChunk, FailWrites: func() error {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			return errors.New("no space left on device")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.PutMeta("versions/x", 1); err == nil {
		t.Error("PutMeta succeeded while writes fail")
	}
	data := randomBytes(testChunk*3+1, 9)
	w, _ := s.NewBlobWriter(shaOf(data))
	w.Write(data)
	if _, err := w.Commit(""); err == nil {
		t.Error("Commit succeeded while writes fail")
	}
	w.Close()
	if n, err := s.ChunkCount(); n != 0 || err != nil {
		t.Errorf("ChunkCount = %d, %v after a failed write", n, err)
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	if err := s.PutMeta("versions/x", 1); err != nil {
		t.Errorf("PutMeta once writes work: %v", err)
	}
	put(t, s, data)
	readBlob(t, s, data)
}

func TestInMemoryDefaultChunkSize(t *testing.T) {
	s, err := Open(Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data := randomBytes(3<<20+5, 77) // several full default-size chunks
	put(t, s, data)
	readBlob(t, s, data)
}

// A commit that takes the cache over its limit returns without deleting
// anything: the eviction goroutine deletes, and while it does, reads of
// other archives, and their Close, do not wait for it. Close waits for
// the goroutine.
func TestEvictionInBackground(t *testing.T) {
	const size = testChunk * 4
	var evicted []string
	s := openLimited(t, "", 2*size, &evicted)
	a, b, c := randomBytes(size, 1), randomBytes(size, 2), randomBytes(size, 3)
	put(t, s, a)
	put(t, s, b)

	picked := make(chan string, 1)
	release := make(chan struct{})
	s.hooks.evicting = func(sha string) {
		picked <- sha
		<-release
	}
	put(t, s, c) // returns while the eviction is held
	var victim string
	select {
	case victim = <-picked:
	case <-time.After(30 * time.Second):
		t.Fatal("no eviction after a commit over the limit")
	}
	if victim != shaOf(a) {
		t.Fatalf("evicting %s, want the least recently used archive", victim)
	}
	if _, _, err := s.statBlob(shaOf(a)); err != nil {
		t.Fatal("the archive was deleted before the eviction goroutine was let go")
	}
	if cached(s, a) {
		t.Fatal("StatBlob finds an archive being evicted")
	}
	// Reads of other archives go on while the eviction is under way,
	// Close included (which asks for another pass).
	for range 3 {
		readBlob(t, s, b)
		readBlob(t, s, c)
	}

	closed := make(chan error, 1)
	stopping := make(chan struct{})
	var once sync.Once
	s.hooks.evictStopWaits = func() { once.Do(func() { close(stopping) }) }
	go func() { closed <- s.Close() }()
	<-stopping
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while the eviction goroutine was deleting", err)
	default:
	}
	close(release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if len(evicted) != 1 || evicted[0] != shaOf(a) {
		t.Errorf("evicted %d archives, want a", len(evicted))
	}
}

// evictionHeld opens a store with a size limit of two archives, puts
// three, and returns once the eviction goroutine has picked the first, a,
// and is held before it deletes it, until release is closed (which the
// caller must do).
func evictionHeld(t *testing.T) (s *Store, a []byte, release chan struct{}) {
	t.Helper()
	const size = testChunk * 4
	s = openLimited(t, "", 2*size, new([]string))
	a, b, c := randomBytes(size, 1), randomBytes(size, 2), randomBytes(size, 3)
	put(t, s, a)
	put(t, s, b)
	picked := make(chan string, 1)
	release = make(chan struct{})
	var once sync.Once
	s.hooks.evicting = func(sha string) {
		once.Do(func() {
			picked <- sha
			<-release
		})
	}
	put(t, s, c)
	select {
	case sha := <-picked:
		if sha != shaOf(a) {
			close(release)
			t.Fatalf("evicting %s, want a", sha)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no eviction after a commit over the limit")
	}
	return s, a, release
}

// A writer that commits an archive while the eviction is deleting that
// very archive keeps its own copy: its Commit, which says the archive is
// stored, is true when it returns, and stays true once the eviction ended.
func TestCommitWhileTheSameArchiveIsEvicted(t *testing.T) {
	s, a, release := evictionHeld(t)
	if cached(s, a) {
		t.Fatal("StatBlob finds an archive being evicted: a caller would not store it again")
	}
	// a is fetched again (a client asked for it) while it is deleted.
	committed := make(chan error, 1)
	go func() {
		w, err := s.NewBlobWriter(shaOf(a))
		if err != nil {
			committed <- err
			return
		}
		if _, err := w.Write(a); err != nil {
			committed <- err
			return
		}
		_, err = w.Commit("h1:test")
		w.Close()
		committed <- err
	}()
	select {
	case err := <-committed:
		close(release)
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(200 * time.Millisecond):
		close(release) // the commit waits for the eviction to end
		if err := <-committed; err != nil {
			t.Fatal(err)
		}
	}
	s.settle()
	if !cached(s, a) {
		t.Fatal("the archive a writer committed is gone: its commit found the record of the copy being evicted and dropped its own")
	}
	readBlob(t, s, a)
}

// StatGeneration changes as soon as an archive starts being evicted,
// since StatBlob stops finding it then: a caller that keeps what it made
// from StatBlob's answers (the engine's rendered documents) sees that it
// no longer holds before the archive is gone.
func TestStatGenerationFollowsTheStartOfAnEviction(t *testing.T) {
	s := openTest(t, "")
	data := randomBytes(testChunk*2, 5)
	put(t, s, data)
	if !cached(s, data) {
		t.Fatal("not cached")
	}
	gen := s.StatGeneration()
	var during uint64
	s.hooks.recordRead = func(string) { during = s.StatGeneration() }
	if _, err := s.EvictBlob(shaOf(data)); err != nil {
		t.Fatal(err)
	}
	if during == gen {
		t.Error("StatGeneration did not change when the archive started being evicted, though StatBlob stopped finding it")
	}
}
