package cache

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The space of archives deleted just before the store was left comes
// back soon after the next Open, though nothing is deleted after it, not
// at the GC's first interval, minutes later, nor at the next deletion:
// when the process died (the deletions Badger replays from its
// write-ahead log are settled and collected as those of this process
// are, where they stayed uncounted in the tables, and their value-log
// files on the disk), and when it closed the store without collecting
// (serve's shutdown: no CollectAtClose).
func TestSpaceOfDeletionsBeforeARestartComesBack(t *testing.T) {
	const (
		limit = 32 << 20 // value-log files of 4 MiB
		size  = 1 << 20
		n     = 16
	)
	for _, tc := range []struct {
		name string
		// leave leaves the store s of dir, and returns the directory
		// the next Open finds.
		leave func(t *testing.T, s *Store, dir string) string
	}{
		{"the process killed", func(t *testing.T, _ *Store, dir string) string { return storeFilesCopy(t, dir) }},
		{"closed", func(t *testing.T, s *Store, dir string) string {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			return dir
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{Dir: dir, MaxBytes: limit}
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
			// Left before its GC settled the deletions.
			s.stopGC()
			<-s.gcDone
			for _, sha := range shas {
				if err := s.deleteBlob(sha, nil); err != nil {
					t.Fatal(err)
				}
			}
			opts.Dir = tc.leave(t, s, dir)
			before := vlogBytes(opts.Dir)

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
			deadline := time.Now().Add(10 * time.Second)
			for vlogBytes(opts.Dir) > want && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			t.Logf("value log: %d MiB before the restart, %d MiB after", before>>20, vlogBytes(opts.Dir)>>20)
			if got := vlogBytes(opts.Dir); got > want {
				t.Errorf("with no archive left, the value log still takes %d MiB 10s after the restart (%d MiB before), want at most %d MiB\n%s",
					got>>20, before>>20, want>>20, dirBreakdown(opts.Dir))
			}
		})
	}
}

// storeFilesCopy is a copy of the files of the store open in live, as
// its process would leave them if it died now: its write-ahead log not
// replayed, which a read-only open refuses.
func storeFilesCopy(t *testing.T, live string) string {
	t.Helper()
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
	return dir
}
