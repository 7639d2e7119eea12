package cache

import (
	"errors"
	"testing"
)

// A writer that commits an archive already cached (another writer's, an
// earlier fetch's or import's) holds it until it is closed, as the writer
// that stored it does: an eviction meanwhile, by retention or by the
// size limit, finds it in use. Were it evicted, the writer's Close would
// then drop its own verified copy, and the archive its Commit said was
// stored would be in the cache nowhere.
func TestSecondWriterHoldsTheArchiveUntilClosed(t *testing.T) {
	s := openLimited(t, "", 0, new([]string))
	data := randomBytes(testChunk*3+5, 941)
	sha := shaOf(data)
	put(t, s, data) // the first writer's, committed and closed

	w := commitAgain(t, s, data)
	defer w.Close()
	if _, err := s.EvictBlob(sha); !errors.Is(err, ErrInUse) {
		t.Errorf("EvictBlob of an archive a writer not yet closed committed: %v, want ErrInUse", err)
	}
	w.Close()
	if !cached(s, data) {
		t.Fatal("the archive a writer committed is gone once the writer closed")
	}
	readBlob(t, s, data)
	if _, err := s.EvictBlob(sha); err != nil {
		t.Fatalf("EvictBlob once the writer is closed: %v", err)
	}
	if n, err := RigOf(s).ChunkCount(); err != nil || n != 0 {
		t.Errorf("%d chunks left (%v), want 0", n, err)
	}
}

// The size limit, too, leaves an archive to the second writer that
// committed it until that writer is closed.
func TestSizeLimitLeavesASecondWritersArchive(t *testing.T) {
	var evicted []string
	data := randomBytes(testChunk*3+5, 942)
	s := openLimited(t, "", int64(len(data))*2, &evicted)
	put(t, s, data)

	w := commitAgain(t, s, data)
	defer w.Close()
	// Over the limit: the archive is the only one, and held.
	other := randomBytes(testChunk*3+5, 943)
	put(t, s, other)
	more := randomBytes(testChunk*3+5, 944)
	put(t, s, more)
	if err := s.EvictNow(t.Context()); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if !cached(s, data) {
		t.Fatalf("the size limit evicted the archive a writer not yet closed committed (evicted: %v)", evicted)
	}
}

// commitAgain writes and commits data, already cached, with a writer of
// its own, which it returns open.
func commitAgain(t *testing.T, s *Store, data []byte) BlobWriter {
	t.Helper()
	w, err := s.NewBlobWriter(shaOf(data))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		w.Close()
		t.Fatal(err)
	}
	if _, err := w.Commit("h1:test"); err != nil {
		w.Close()
		t.Fatal(err)
	}
	return w
}
