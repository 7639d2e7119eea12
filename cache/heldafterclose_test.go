package cache

import (
	"errors"
	"io"
	"testing"
)

// A reader open across the store's Close fails with ErrClosed from then
// on, within the chunk it read last too: before, the chunk it held in
// memory answered every read that fell in it after Close (a client
// served a chunk more of an archive from a closed store), and only the
// next chunk failed. A reader read after its own Close fails as well,
// where it read the store again with nothing protecting the archive.
func TestReaderFailsWithinHeldChunkAfterClose(t *testing.T) {
	s, err := Open(Options{InMemory: true, ChunkSize: testChunk})
	if err != nil {
		t.Fatal(err)
	}
	data := randomBytes(testChunk*2+1, 40)
	put(t, s, data)
	reader, err := s.OpenBlob(shaOf(data))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	first := make([]byte, 10)
	if _, err := io.ReadFull(reader, first); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := reader.ReadAt(make([]byte, 10), 20); !errors.Is(err, ErrClosed) || n != 0 {
		t.Errorf("ReadAt within the chunk read last, after Close = %d, %v; want 0, ErrClosed", n, err)
	}
	if n, err := reader.Read(make([]byte, 10)); !errors.Is(err, ErrClosed) || n != 0 {
		t.Errorf("Read within the chunk read last, after Close = %d, %v; want 0, ErrClosed", n, err)
	}

	s2, err := Open(Options{InMemory: true, ChunkSize: testChunk})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	put(t, s2, data)
	closed, err := s2.OpenBlob(shaOf(data))
	if err != nil {
		t.Fatal(err)
	}
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := closed.ReadAt(make([]byte, 10), 0); err == nil || n != 0 {
		t.Errorf("ReadAt after the reader's Close = %d, %v; want 0 and an error", n, err)
	}
}
