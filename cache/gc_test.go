package cache

import (
	"bytes"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache/internal/disk"
)

// dirBytes is the disk space the files under dir take.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += disk.Allocated(fi)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// After evictions the data directory returns to within 1.25 times the
// cached bytes plus the disk reserve, within 2 minutes: a cache limited to
// 64 MiB is filled with twice that, in archives of 4 MiB, with no help
// from the caller: the store runs the value-log GC itself. Every archive left reads back intact.
func TestDiskFollowsTheCacheAfterEvictions(t *testing.T) {
	const (
		limit = 64 << 20
		size  = 4 << 20
	)
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, MaxBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	var blobs [][]byte
	for i := range 2 * limit / size {
		b := make([]byte, size)
		rand.NewChaCha8([32]byte{byte(i)}).Read(b) // fast under -race, unlike randomBytes
		blobs = append(blobs, b)
		w, err := s.NewBlobWriter(shaOf(blobs[i]))
		if err != nil {
			t.Fatal(err)
		}
		w.Write(blobs[i])
		if _, err := w.Commit(""); err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
	s.settle()
	archives, cachedBytes := s.Stats()
	if cachedBytes > limit || archives != limit/size {
		t.Fatalf("after eviction: %d archives, %d bytes; want %d archives under the %d-byte limit", archives, cachedBytes, limit/size, limit)
	}
	bound := cachedBytes + cachedBytes/4 + DefaultDiskReserve
	start := time.Now()
	var used int64
	for used = dirBytes(t, dir); used > bound; used = dirBytes(t, dir) {
		if time.Since(start) > 2*time.Minute {
			t.Fatalf("the data directory holds %d MiB 2 minutes after evicting down to %d MiB; want at most %d MiB",
				used>>20, cachedBytes>>20, bound>>20)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d MiB written, %d MiB cached: the data directory is %d MiB (bound %d MiB) %s after the last eviction",
		len(blobs)*size>>20, cachedBytes>>20, used>>20, bound>>20, time.Since(start).Round(time.Millisecond))

	if testing.Verbose() {
		entries, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, e := range entries {
			var st fs.FileInfo
			if st, err = os.Stat(e); err == nil {
				t.Logf("%s: size %d, allocated %d", filepath.Base(e), st.Size(), disk.Allocated(st))
			}
		}
	}
	kept := 0
	for _, b := range blobs {
		r, err := s.OpenBlob(shaOf(b))
		if err != nil {
			continue
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("archive %s reads back wrong after value-log GC: %v", shaOf(b), err)
		}
		kept++
	}
	if kept != archives {
		t.Errorf("%d archives readable, want %d", kept, archives)
	}
}

// What a store opened with CollectAtClose deleted returns to the disk
// before Close ends, though the deletions came just before it, within the settle interval of one
// another: a command that opens the data directory by itself (an import
// whose packages were all refused, their archives deleted as they were
// refused) exits right after its last deletion, and the value log must
// not keep their bytes until the next Open.
func TestCloseReturnsTheSpaceOfDeletions(t *testing.T) {
	const (
		limit = 64 << 20 // value-log files of 4 MiB
		size  = 4 << 20
		n     = 8
	)
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, MaxBytes: limit, CollectAtClose: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		b := make([]byte, size)
		rand.NewChaCha8([32]byte{byte(i), 1}).Read(b)
		w, err := s.NewBlobWriter(shaOf(b))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
		// Refused: what it staged is deleted.
		if err := w.Abort(); err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
	written := vlogBytes(dir)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Badger never collects the value-log file it writes to.
	bound := 2 * valueLogFileSizeFor(limit)
	if left := vlogBytes(dir); left > bound {
		t.Fatalf("after %d MiB written and deleted, the value log holds %d MiB once the store is closed (%d MiB before Close); want at most %d MiB",
			n*size>>20, left>>20, written>>20, bound>>20)
	}
}
