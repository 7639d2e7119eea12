package cache

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"
)

// Shutdown refuses new writers at once, lets the writer already open
// finish and commit, and only then closes the database; afterwards every
// read fails with ErrClosed instead of reaching a closed Badger.
func TestShutdownWaitsForOpenWriter(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, ChunkSize: testChunk})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutMeta("versions/a", "doc"); err != nil {
		t.Fatal(err)
	}
	old := randomBytes(testChunk*2+1, 30)
	put(t, s, old)
	reader, err := s.OpenBlob(shaOf(old)) // open across the shutdown
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()

	data := randomBytes(testChunk*3+5, 31)
	w, err := s.NewBlobWriter(shaOf(data))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data[:testChunk+7])

	waiting := make(chan struct{})
	s.hooks.shutdownWaits = func() { close(waiting) }
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(t.Context()) }()
	<-waiting

	if _, err := s.NewBlobWriter(shaOf(old)); !errors.Is(err, ErrClosed) {
		t.Errorf("NewBlobWriter during shutdown: %v, want ErrClosed", err)
	}
	if err := s.PutMeta("versions/b", "doc"); !errors.Is(err, ErrClosed) {
		t.Errorf("PutMeta during shutdown: %v, want ErrClosed", err)
	}
	var doc string
	if _, err := s.GetMeta("versions/a", &doc); err != nil || doc != "doc" {
		t.Errorf("GetMeta during shutdown = %q, %v; reads go on until the writers are done", doc, err)
	}
	// The open writer finishes its work.
	w.Write(data[testChunk+7:])
	if _, err := w.Commit("h1:test"); err != nil {
		t.Fatalf("Commit during shutdown: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) while a writer was still open", err)
	default:
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}

	// Everything fails cleanly now.
	if _, err := s.GetMeta("versions/a", &doc); !errors.Is(err, ErrClosed) {
		t.Errorf("GetMeta after shutdown: %v, want ErrClosed", err)
	}
	if err := s.ScanMeta("", func(string, time.Time, json.RawMessage) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("ScanMeta after shutdown: %v, want ErrClosed", err)
	}
	if _, err := s.StatBlob(shaOf(data)); !errors.Is(err, ErrClosed) {
		t.Errorf("StatBlob after shutdown: %v, want ErrClosed", err)
	}
	if _, err := s.OpenBlob(shaOf(data)); !errors.Is(err, ErrClosed) {
		t.Errorf("OpenBlob after shutdown: %v, want ErrClosed", err)
	}
	if _, err := reader.ReadAt(make([]byte, 10), testChunk); !errors.Is(err, ErrClosed) {
		t.Errorf("ReadAt of a blob left open: %v, want ErrClosed", err)
	}
	if err := s.DeleteBlob(shaOf(old)); !errors.Is(err, ErrClosed) {
		t.Errorf("DeleteBlob after shutdown: %v, want ErrClosed", err)
	}
	if _, err := s.ChunkCount(); !errors.Is(err, ErrClosed) {
		t.Errorf("ChunkCount after shutdown: %v, want ErrClosed", err)
	}
	if err := s.Ping(); !errors.Is(err, ErrClosed) {
		t.Errorf("Ping after shutdown: %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close after Shutdown: %v", err)
	}

	// The writer's archive was committed before the database closed.
	s2, err := Open(Options{Dir: dir, ChunkSize: testChunk})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	b, err := s2.OpenBlob(shaOf(data))
	if err != nil {
		t.Fatalf("archive committed during shutdown is gone: %v", err)
	}
	got := make([]byte, len(data))
	if _, err := b.ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
		t.Errorf("archive committed during shutdown reads back wrong: %v", err)
	}
	b.Close()
	if n, err := s2.ChunkCount(); err != nil || n != 4+3 {
		t.Errorf("ChunkCount after reopening = %d, %v; want 7", n, err)
	}
}

// When the wait ends (ctx) or is not wanted (Close), the writers still
// open are abandoned: the database closes, they fail with ErrClosed
// without panicking, and the next Open removes what they staged.
func TestCloseAbandonsOpenWriter(t *testing.T) {
	tests := []struct {
		name    string
		close   func(s *Store) error
		wantErr error
	}{
		{"close", func(s *Store) error { return s.Close() }, nil},
		{"shutdown cancelled", func(s *Store) error {
			ctx, cancel := context.WithCancel(context.Background())
			s.hooks.shutdownWaits = cancel
			return s.Shutdown(ctx)
		}, context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(Options{Dir: dir, ChunkSize: testChunk})
			if err != nil {
				t.Fatal(err)
			}
			data := randomBytes(testChunk*3+5, 32)
			w, err := s.NewBlobWriter(shaOf(data))
			if err != nil {
				t.Fatal(err)
			}
			w.Write(data[:testChunk*2])
			if err := tc.close(s); !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("closing: %v, want %v", err, tc.wantErr)
			}
			// The abandoned writer goes on without reaching Badger, for
			// its followers: what it holds in memory, its failure to
			// store the rest in Err.
			w.Write(data[testChunk*2:])
			if err := w.Err(); !errors.Is(err, ErrClosed) {
				t.Errorf("Err after close: %v, want ErrClosed", err)
			}
			if n, err := followAt(w, make([]byte, 5), testChunk*3); n != 5 || err != nil {
				t.Errorf("ReadAt of the chunk the writer holds after close: %d, %v; want its 5 bytes", n, err)
			}
			if _, err := w.Commit("h1:test"); !errors.Is(err, ErrClosed) {
				t.Errorf("Commit after close: %v, want ErrClosed", err)
			}
			if _, err := followAt(w, make([]byte, 10), 0); !errors.Is(err, ErrClosed) {
				t.Errorf("ReadAt of a staged chunk after close: %v, want ErrClosed", err)
			}
			if err := w.Close(); !errors.Is(err, ErrClosed) {
				t.Errorf("writer Close after close: %v, want ErrClosed", err)
			}

			s2, err := Open(Options{Dir: dir, ChunkSize: testChunk})
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			s2.waitCount() // the clean-up follows the count, in the background
			if n, err := s2.ChunkCount(); err != nil || n != 0 {
				t.Errorf("ChunkCount after reopening = %d, %v; want 0", n, err)
			}
			if _, err := s2.StatBlob(shaOf(data)); !errors.Is(err, ErrNotFound) {
				t.Errorf("StatBlob after reopening: %v, want ErrNotFound", err)
			}
		})
	}
}

// A scan's callback runs outside the store's locks: it may read the store,
// and the database may be closed or swapped meanwhile (the free-space
// watcher reopening it read-write), without a deadlock.
func TestScanCallbackHoldsNoLock(t *testing.T) {
	s := openTest(t, "")
	for i := range scanBatch + 1 {
		if err := s.PutMeta(fmt.Sprintf("versions/%04d", i), "doc"); err != nil {
			t.Fatal(err)
		}
	}
	var seen int
	err := s.ScanMeta("versions/", func(key string, _ time.Time, _ json.RawMessage) error {
		seen++
		if seen > 1 {
			return nil
		}
		// Takes the store's database lock for writing: it would wait
		// forever for a callback run under the read lock.
		swapped := make(chan struct{})
		go func() { s.reopenWritable(); close(swapped) }()
		select {
		case <-swapped:
		case <-time.After(10 * time.Second):
			panic("reopening the database waited for a scan callback: deadlock")
		}
		var doc string
		if _, err := s.GetMeta(key, &doc); err != nil || doc != "doc" {
			t.Errorf("GetMeta from a scan callback = %q, %v", doc, err)
		}
		return nil
	})
	if err != nil || seen != scanBatch+1 {
		t.Fatalf("ScanMeta saw %d documents, err %v; want %d", seen, err, scanBatch+1)
	}
}

// Close during a scan does not wait for the callback; the scan ends with
// ErrClosed at its next read of the store.
func TestCloseDuringScan(t *testing.T) {
	s := openTest(t, "")
	for i := range scanBatch + 1 {
		if err := s.PutMeta(fmt.Sprintf("versions/%04d", i), "doc"); err != nil {
			t.Fatal(err)
		}
	}
	first := true
	err := s.ScanMeta("versions/", func(string, time.Time, json.RawMessage) error {
		if first {
			first = false
			if err := s.Close(); err != nil {
				t.Errorf("Close during a scan: %v", err)
			}
			var doc string
			if _, err := s.GetMeta("versions/0000", &doc); !errors.Is(err, ErrClosed) {
				t.Errorf("GetMeta after Close: %v, want ErrClosed", err)
			}
		}
		return nil
	})
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("ScanMeta across Close: %v, want ErrClosed", err)
	}
}

// Close compacts the L0 tables (the memtable it flushes among them), so
// that the next start has none to compact beside its own passes.
func TestCloseLeavesNoL0Tables(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, DiskReserve: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if err := s.PutMeta(fmt.Sprintf("package/p%05d", i), i); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s, err = Open(Options{Dir: dir, DiskReserve: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.waitCount()
	tables := 0
	for _, l := range s.db.bdb.Levels() {
		if l.Level == 0 && l.NumTables > 0 {
			t.Errorf("%d L0 tables after Close", l.NumTables)
		}
		tables += l.NumTables
	}
	if tables == 0 {
		t.Error("no tables at all: the documents were not flushed at Close")
	}
}

// A Shutdown whose writers all closed by the time it waits returns clean,
// even with its ctx done too: the writers' end is looked at first, as a
// select with both ready picks either at random. Before, every other such
// Shutdown failed with "closed with 0 archive writers still open".
func TestShutdownDrainedBeatsDoneContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 20 {
		s, err := Open(Options{InMemory: true, ChunkSize: testChunk})
		if err != nil {
			t.Fatal(err)
		}
		w, err := s.NewBlobWriter(shaOf([]byte(fmt.Sprint(i))))
		if err != nil {
			t.Fatal(err)
		}
		s.hooks.shutdownWaits = func() { w.Close() } // the last writer closes as Shutdown begins to wait
		if err := s.Shutdown(ctx); err != nil {
			t.Fatalf("round %d: Shutdown with no writer left open, its ctx done: %v", i, err)
		}
	}
}
