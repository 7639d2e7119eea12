package cache

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// lockedBuffer is a log destination safe for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A byte the disk changed under a committed archive is never read as
// the archive's: reading it fails (ErrDamaged), as a failing disk's
// sector must, and the damage is logged once however often it is read.
func TestDamagedChunkOnDiskIsNotServedAndReplaced(t *testing.T) {
	dir := t.TempDir()
	const chunk = 128 << 10 // above the value threshold: chunks go to the value log
	// Several value log files (their size follows MaxBytes), so that
	// the damaged one is not the last, which Badger checks at Open.
	data := randomBytes(48*chunk-5000, 7)
	open := func(log *slog.Logger) *Store {
		s, err := Open(Options{Dir: dir, ChunkSize: chunk, Logger: log, MaxBytes: 64 << 20})
		if err != nil {
			t.Fatal(err)
		}
		s.waitCount()
		return s
	}
	s := open(nil)
	put(t, s, data)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Flip one byte of the second chunk where the value log holds it.
	target := data[chunk+1000 : chunk+1064]
	logs, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	flipped := false
	for _, name := range logs {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(b, target); i >= 0 && name != logs[len(logs)-1] {
			b[i+10] ^= 0xff
			if err := os.WriteFile(name, b, 0o600); err != nil {
				t.Fatal(err)
			}
			flipped = true
		}
	}
	if len(logs) < 2 {
		t.Fatalf("%d value log files, want several", len(logs))
	}
	if !flipped {
		t.Fatal("the chunk was not found in any value log file")
	}

	var logged lockedBuffer
	var counted atomic.Int32
	s, err := Open(Options{Dir: dir, ChunkSize: chunk, MaxBytes: 64 << 20,
		Logger: slog.New(slog.NewTextHandler(&logged, nil)), OnDamaged: func() { counted.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	s.waitCount()
	t.Cleanup(func() { s.Close() })
	// Three readers opened before the damage is found each find it.
	var readers []BlobReader
	for range 3 {
		r, err := s.OpenBlob(shaOf(data))
		if err != nil {
			t.Fatal(err)
		}
		readers = append(readers, r)
	}
	for _, r := range readers {
		got, err := io.ReadAll(r)
		r.Close()
		if err == nil {
			t.Fatalf("read %d bytes of a damaged archive without error (equal to what was stored: %v)", len(got), bytes.Equal(got, data))
		}
		if !errors.Is(err, ErrDamaged) {
			t.Fatalf("reading a damaged archive: %v, want ErrDamaged", err)
		}
	}
	if n := strings.Count(logged.String(), "damaged where it is stored"); n != 1 {
		t.Fatalf("the damage was logged %d times, want once:\n%s", n, logged.String())
	}
	if n := counted.Load(); n != 1 {
		t.Errorf("the damage was counted %d times, want once", n)
	}

	// Found damaged, it is not cached any more for those who ask: the
	// next writer (a fetch from the origin) replaces it.
	if _, err := s.StatBlob(shaOf(data)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("StatBlob of an archive found damaged: %v, want ErrNotFound", err)
	}
	if _, err := s.OpenBlob(shaOf(data)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("OpenBlob of an archive found damaged: %v, want ErrNotFound", err)
	}
	chunks := chunkCount(t, s)
	put(t, s, data)
	r, err := s.OpenBlob(shaOf(data))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the archive committed anew: %v, %d bytes (equal: %v)", err, len(got), bytes.Equal(got, data))
	}
	if n, total := s.Stats(); n != 1 || total != int64(len(data)) {
		t.Errorf("Stats = %d archives, %d bytes; want 1, %d", n, total, len(data))
	}
	if n := chunkCount(t, s); n != chunks {
		t.Errorf("%d chunks stored after the damaged copy was replaced, want %d", n, chunks)
	}
}
