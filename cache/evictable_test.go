package cache

import (
	"errors"
	"testing"
	"time"
)

// Archives the owner says may not be evicted stay over the limit, and the
// least recently used of the others goes; at Open, Options.Evictable
// decides until SetEvictable is called.
func TestEvictionKeepsWhatMayNotBeEvicted(t *testing.T) {
	const size = testChunk * 3
	dir := t.TempDir()
	var evicted []string
	s := openLimited(t, dir, 10*size, &evicted)
	var blobs [][]byte
	for i := range 4 {
		blobs = append(blobs, randomBytes(size, uint64(300+i)))
		put(t, s, blobs[i])
	}
	s.Close()

	// Reopened with a limit of two archives and nothing evictable yet.
	s, err := Open(Options{Dir: dir, ChunkSize: testChunk, MaxBytes: 2 * size, Evictable: func(string) bool { return false }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.settle()
	if n, _ := s.Stats(); n != 4 {
		t.Fatalf("evicted at Open before the owner said what may go: %d archives left", n)
	}
	keep := map[string]bool{shaOf(blobs[0]): true, shaOf(blobs[1]): true, shaOf(blobs[2]): true}
	s.SetEvictable(func(sha string) bool { return !keep[sha] })
	s.settle()
	for i, b := range blobs {
		if got, want := cached(s, b), i < 3; got != want {
			t.Errorf("blob %d cached = %v, want %v", i, got, want)
		}
	}
}

// EvictBlob never deletes an archive from under a reader.
func TestEvictBlobInUse(t *testing.T) {
	s := openLimited(t, "", 0, new([]string))
	data := randomBytes(testChunk*2, 400)
	put(t, s, data)
	r, err := s.OpenBlob(shaOf(data))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.EvictBlob(shaOf(data)); !errors.Is(err, ErrInUse) {
		t.Errorf("EvictBlob of an open archive: %v, want ErrInUse", err)
	}
	readBlob(t, s, data)
	r.Close()
	info, err := s.EvictBlob(shaOf(data))
	if err != nil || info.Size != int64(len(data)) {
		t.Fatalf("EvictBlob: %+v, %v", info, err)
	}
	if cached(s, data) {
		t.Error("still cached")
	}
	if _, err := s.EvictBlob(shaOf(data)); !errors.Is(err, ErrNotFound) {
		t.Errorf("EvictBlob of a removed archive: %v, want ErrNotFound", err)
	}
}

// EvictBlob removes an archive committed before the store was opened,
// also without a size limit (when the count keeps no entry per archive),
// and still never from under a reader.
func TestEvictBlobAfterReopen(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	data := randomBytes(testChunk*2, 401)
	put(t, s, data)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir)
	r, err := s.OpenBlob(shaOf(data))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.EvictBlob(shaOf(data)); !errors.Is(err, ErrInUse) {
		t.Errorf("EvictBlob of an open archive: %v, want ErrInUse", err)
	}
	r.Close()
	info, err := s.EvictBlob(shaOf(data))
	if err != nil || info.Size != int64(len(data)) {
		t.Fatalf("EvictBlob after a reopen: %+v, %v", info, err)
	}
	if cached(s, data) {
		t.Error("still cached")
	}
	if _, err := s.EvictBlob(shaOf(randomBytes(10, 402))); !errors.Is(err, ErrNotFound) {
		t.Errorf("EvictBlob of an archive never stored: %v, want ErrNotFound", err)
	}
}

// EvictBlobs removes archives together, after what names them: none
// while one is read, none when first fails; first may commit one of the
// archives again (what waits for an eviction to end would otherwise wait
// for ever on the eviction that runs first); an archive not cached is
// skipped.
func TestEvictBlobsTogether(t *testing.T) {
	s := openLimited(t, "", 0, new([]string))
	a, b := randomBytes(testChunk*2, 410), randomBytes(testChunk, 411)
	put(t, s, a)
	put(t, s, b)
	absent := shaOf(randomBytes(10, 412))
	shas := []string{shaOf(a), shaOf(b), absent}

	r, err := s.OpenBlob(shaOf(b))
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	if _, err := s.EvictBlobs(shas, func() error { ran = true; return nil }); !errors.Is(err, ErrInUse) || ran {
		t.Errorf("EvictBlobs with one archive read: %v (first ran: %v), want ErrInUse before first", err, ran)
	}
	r.Close()
	if !cached(s, a) || !cached(s, b) {
		t.Fatal("EvictBlobs refused with ErrInUse removed an archive")
	}

	refused := errors.New("the record cannot be changed")
	if _, err := s.EvictBlobs(shas, func() error { return refused }); !errors.Is(err, refused) {
		t.Errorf("EvictBlobs whose first fails: %v", err)
	}
	if !cached(s, a) || !cached(s, b) {
		t.Fatal("EvictBlobs whose first failed removed an archive")
	}
	readBlob(t, s, a)

	removed, err := s.EvictBlobs(shas, func() error {
		done := make(chan struct{})
		go func() {
			defer close(done)
			put(t, s, a) // a writer of the same archive commits meanwhile
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("a writer of an archive EvictBlobs removes waited 10s while first ran")
		}
		return nil
	})
	if err != nil || len(removed) != 2 || removed[shaOf(a)].Size != int64(len(a)) || removed[shaOf(b)].Size != int64(len(b)) {
		t.Fatalf("EvictBlobs: %+v, %v", removed, err)
	}
	if cached(s, a) || cached(s, b) {
		t.Error("still cached")
	}
}
