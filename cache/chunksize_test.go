package cache

import (
	"bytes"
	"io"
	"testing"
)

// writeAndReadBack writes data through w, checking the bytes read back
// while it is written and, once committed, from the store.
func writeAndReadBack(t *testing.T, s *Store, w BlobWriter, data []byte) {
	t.Helper()
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	streamed := make([]byte, len(data))
	if n, err := followAt(w, streamed, 0); err != nil || n != len(data) || !bytes.Equal(streamed, data) {
		t.Errorf("bytes read back while the archive is written differ from those written (%d bytes, %v)", n, err)
	}
	if _, err := w.Commit("h1:x"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r, err := s.OpenBlob(shaOf(data))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the committed archive read back: %v, the bytes written %v: other bytes served under its verified sha256", err, bytes.Equal(got, data))
	}
}

// TestArchiveOfALargerChunkSizeLeavesNextWriteWhole: a store reopened
// with a smaller ChunkSize reads an archive stored with the larger one,
// in a buffer grown for it; the archives written after it are stored
// and read back as written. The grown buffer used to go back to the
// pool, where the next writer took it and filled chunks to its capacity
// while its reads and the commit record counted in ChunkSize: other bytes
// than the archive's, served under its verified sha256, and no error.
func TestArchiveOfALargerChunkSizeLeavesNextWriteWhole(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, ChunkSize: 4 * testChunk})
	if err != nil {
		t.Fatal(err)
	}
	s.waitCount()
	old := randomBytes(10*testChunk, 1)
	put(t, s, old)
	s.Close()

	s = openTest(t, dir) // ChunkSize testChunk
	// A pool may drop what is put in it (with -race, at random): more
	// than one try.
	for i := range 10 {
		readBlob(t, s, old)
		data := randomBytes(8*testChunk+100, uint64(2+i))
		w, err := s.NewBlobWriter(shaOf(data))
		if err != nil {
			t.Fatal(err)
		}
		writeAndReadBack(t, s, w, data)
	}
}

// TestWriterChunksAreChunkSize: a writer stores chunks of ChunkSize
// whatever the capacity of its buffer, so that what it stores is where
// its reads and the commit record look for it.
func TestWriterChunksAreChunkSize(t *testing.T) {
	s := openTest(t, t.TempDir())
	data := randomBytes(8*testChunk+100, 5)
	w, err := s.NewBlobWriter(shaOf(data))
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 0, 4*testChunk)
	w.(*blobWriter).cur = &big
	writeAndReadBack(t, s, w, data)
}
