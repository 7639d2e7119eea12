package cache

import (
	"sync"
	"testing"
)

// An archive committed while the store is being reopened read-write, after
// the records were read for the counters and before the counters are set,
// is counted: the store is not writable for anyone else until they are.
func TestReopenWritableCountsConcurrentCommit(t *testing.T) {
	dir := t.TempDir()
	disk := newFakeDisk(1 << 30)
	s := openSpace(t, dir, disk)
	first := randomBytes(testChunk*2+5, 21)
	put(t, s, first)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	disk.free.Store(testReserve - 1)
	s = openSpace(t, dir, disk)
	if !s.db.readOnly {
		t.Fatal("not opened read-only below the reserve")
	}

	second := randomBytes(testChunk*3+1, 22)
	committed := make(chan error, 1)
	s.hooks.recounted = func() {
		s.hooks.recounted = nil
		// Commit from another goroutine and go on once it is done or
		// waits for the reopen to finish.
		waits := make(chan struct{})
		var once sync.Once
		s.hooks.dbWaits = func() { once.Do(func() { close(waits) }) }
		done := make(chan error, 1)
		go func() { done <- putErr(s, second) }()
		select {
		case err := <-done:
			committed <- err
		case <-waits:
			go func() { committed <- <-done }()
		}
	}
	disk.free.Store(1 << 30)
	s.checkSpace()
	if err := <-committed; err != nil {
		t.Fatalf("commit during the reopen: %v", err)
	}

	n, total := s.Stats()
	if want := int64(len(first) + len(second)); n != 2 || total != want {
		t.Errorf("Stats after a commit during the reopen = %d archives, %d bytes; want 2, %d", n, total, want)
	}
	readBlob(t, s, first)
	readBlob(t, s, second)
}

// putErr is put for goroutines other than the test's.
func putErr(s *Store, data []byte) error {
	w, err := s.NewBlobWriter(shaOf(data))
	if err != nil {
		return err
	}
	defer w.Close()
	if _, err := w.Write(data); err != nil {
		return err
	}
	_, err = w.Commit("h1:test")
	return err
}
