package cache

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The space of archives deleted just before the process died comes back
// after the restart, though nothing is deleted after it: the deletions
// Badger replays from its write-ahead log are settled and collected as
// those of this process are, where they stayed uncounted in the tables,
// and their value-log files on the disk, until the next deletion.
func TestSpaceOfDeletionsBeforeACrashComesBack(t *testing.T) {
	const (
		limit = 32 << 20 // value-log files of 4 MiB
		size  = 1 << 20
		n     = 16
	)
	live := t.TempDir()
	opts := Options{Dir: live, MaxBytes: limit}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Stats()
	var shas []string
	for i := range n {
		b := make([]byte, size)
		rand.NewChaCha8([32]byte{byte(i)}).Read(b)
		if err := putErr(s, b); err != nil {
			t.Fatal(err)
		}
		shas = append(shas, shaOf(b))
	}
	// The process dies before its GC settled the deletions.
	s.stopGC()
	<-s.gcDone
	for _, sha := range shas {
		if err := s.deleteBlob(sha, nil); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	entries, err := os.ReadDir(live)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "LOCK" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(live, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	before := vlogBytes(dir)

	opts.Dir = dir
	r, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if a, _ := r.Stats(); a != 0 {
		t.Fatalf("%d archives after the restart, want 0", a)
	}
	// Left at most the newest value-log file, which GC never rewrites.
	want := int64(2 * r.db.bopts.ValueLogFileSize)
	deadline := time.Now().Add(15 * time.Second)
	for vlogBytes(dir) > want && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("value log: %d MiB before the restart, %d MiB after", before>>20, vlogBytes(dir)>>20)
	if got := vlogBytes(dir); got > want {
		t.Errorf("with no archive left, the value log still takes %d MiB after the restart (%d MiB before), want at most %d MiB\n%s",
			got>>20, before>>20, want>>20, dirBreakdown(dir))
	}
}

// A store closed without collecting (serve's shutdown: no
// CollectAtClose) right after deletions its GC had not settled yet gets
// their space back soon after the next Open, not at the GC's first
// interval, minutes later.
func TestSpaceOfDeletionsBeforeACloseComesBackAtOpen(t *testing.T) {
	const (
		limit = 32 << 20 // value-log files of 4 MiB
		size  = 1 << 20
		n     = 16
	)
	dir := t.TempDir()
	opts := Options{Dir: dir, MaxBytes: limit}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Stats()
	var shas []string
	for i := range n {
		b := make([]byte, size)
		rand.NewChaCha8([32]byte{byte(i)}).Read(b)
		if err := putErr(s, b); err != nil {
			t.Fatal(err)
		}
		shas = append(shas, shaOf(b))
	}
	// Closed before its GC settled the deletions.
	s.stopGC()
	<-s.gcDone
	for _, sha := range shas {
		if err := s.deleteBlob(sha, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := vlogBytes(dir)

	r, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want := int64(2 * r.db.bopts.ValueLogFileSize)
	deadline := time.Now().Add(10 * time.Second)
	for vlogBytes(dir) > want && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("value log: %d MiB at the close, %d MiB after the Open", before>>20, vlogBytes(dir)>>20)
	if got := vlogBytes(dir); got > want {
		t.Errorf("with no archive left, the value log still takes %d MiB 10s after the Open (%d MiB at the close), want at most %d MiB\n%s",
			got>>20, before>>20, want>>20, dirBreakdown(dir))
	}
}
