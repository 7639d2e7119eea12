package cache

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
)

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
	damageOnDisk(t, dir, data[chunk+1000:chunk+1064])

	var logged logbuf.Buffer
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
	if !strings.Contains(logged.String(), "sha256="+shaOf(data)) {
		t.Errorf("the damage's log line does not name the archive (sha256=%s):\n%s", shaOf(data), logged.String())
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

// damageOnDisk flips one byte of target where a value-log file of the
// closed store in dir holds it, in a file that is not the last (which
// Badger checks at Open).
func damageOnDisk(t *testing.T, dir string, target []byte) {
	t.Helper()
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
}

// An archive a read found damaged stays refused after a restart, whether
// the process closed the store or was killed: the mark is kept with its
// commit record, so that no client is sent the damaged copy again, and
// no read has to find it again. The copy that replaces it clears the
// mark, for good too.
func TestDamagedMarkSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	const chunk = 128 << 10
	data := randomBytes(48*chunk-5000, 11)
	sha := shaOf(data)
	var logged logbuf.Buffer
	var counted atomic.Int32
	open := func(dir string) *Store {
		t.Helper()
		s, err := Open(Options{Dir: dir, ChunkSize: chunk, MaxBytes: 64 << 20,
			Logger: slog.New(slog.NewTextHandler(&logged, nil)), OnDamaged: func() { counted.Add(1) }})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open(dir)
	s.waitCount()
	put(t, s, data)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	damageOnDisk(t, dir, data[chunk+1000:chunk+1064])

	s = open(dir)
	r, err := s.OpenBlob(sha)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(r); !errors.Is(err, ErrDamaged) {
		t.Fatalf("reading the damaged archive: %v, want ErrDamaged", err)
	}
	r.Close()
	if n := s.DamagedArchives(); n != 1 {
		t.Errorf("DamagedArchives = %d once the damage was found, want 1", n)
	}
	// What a process killed now leaves on disk.
	killed := t.TempDir()
	copyDir(t, dir, killed)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	refused := func(s *Store, how string) {
		t.Helper()
		// Asked before the count at open is over, as the first request
		// after a restart may be.
		if _, err := s.StatBlob(sha); !errors.Is(err, ErrNotFound) || !errors.Is(err, ErrDamaged) {
			t.Errorf("%s: StatBlob of the archive found damaged before: %v, want ErrNotFound and ErrDamaged", how, err)
		}
		if r, err := s.OpenBlob(sha); !errors.Is(err, ErrNotFound) || !errors.Is(err, ErrDamaged) {
			n := -1
			if err == nil {
				b, _ := io.ReadAll(r)
				n = len(b)
				r.Close()
			}
			t.Errorf("%s: OpenBlob of the archive found damaged before: %v (%d bytes read), want ErrNotFound and ErrDamaged", how, err, n)
		}
		s.waitCount()
		if n, total := s.Stats(); n != 1 || total != int64(len(data)) {
			t.Errorf("%s: Stats = %d archives, %d bytes; want the damaged copy kept, 1, %d", how, n, total, len(data))
		}
		if n := s.DamagedArchives(); n != 1 {
			t.Errorf("%s: DamagedArchives = %d, want 1", how, n)
		}
	}
	for _, c := range []struct{ name, dir string }{{"closed and reopened", dir}, {"killed and reopened", killed}} {
		s := open(c.dir)
		refused(s, c.name)
		if c.dir == killed {
			// Deleted (pruned, evicted), it takes its mark along.
			if err := s.DeleteBlob(sha); err != nil {
				t.Fatal(err)
			}
			if n := s.DamagedArchives(); n != 0 {
				t.Errorf("DamagedArchives = %d once the archive was deleted, want 0", n)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := counted.Load(); n != 1 {
		t.Errorf("the damage was counted %d times, want once (when it was found)", n)
	}
	if n := strings.Count(logged.String(), "cached archives found damaged where they are stored are kept"); n != 2 {
		t.Errorf("the archives marked damaged were logged at %d of the 2 starts since:\n%s", n, logged.String())
	}

	// A verified copy replaces it, and the mark goes with the damaged copy.
	s = open(dir)
	s.waitCount()
	chunks := chunkCount(t, s)
	put(t, s, data)
	if n := s.DamagedArchives(); n != 0 {
		t.Errorf("DamagedArchives = %d once the copy was replaced, want 0", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(dir)
	t.Cleanup(func() { s.Close() })
	if n := s.DamagedArchives(); n != 0 {
		t.Errorf("DamagedArchives = %d after a restart once the copy was replaced, want 0", n)
	}
	s.waitCount()
	if _, err := s.StatBlob(sha); err != nil {
		t.Fatalf("StatBlob of the archive replaced, after a restart: %v", err)
	}
	r, err = s.OpenBlob(sha)
	if err != nil {
		t.Fatalf("OpenBlob of the archive replaced, after a restart: %v", err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the archive replaced, after a restart: %v, %d bytes (equal: %v)", err, len(got), bytes.Equal(got, data))
	}
	if n, total := s.Stats(); n != 1 || total != int64(len(data)) {
		t.Errorf("Stats = %d archives, %d bytes; want 1, %d", n, total, len(data))
	}
	if n := chunkCount(t, s); n != chunks {
		t.Errorf("%d chunks stored after the damaged copy was replaced, want %d", n, chunks)
	}
	if n := strings.Count(logged.String(), "cached archives found damaged where they are stored are kept"); n != 3 {
		t.Errorf("archives marked damaged logged at %d starts since the copy was replaced, want none", n-3)
	}
}

// An archive found damaged while the disk is full (below the reserve: no
// write admitted) cannot have its mark written into its record: it is
// refused all the same until the process ends, and kept, not thrown
// away; once there is room the next writer replaces it. A process killed
// meanwhile left no mark on disk: after the restart, a read finds the
// damage again, and no byte of it is served as the archive's.
func TestDamagedMarkOnFullDisk(t *testing.T) {
	dir := t.TempDir()
	const chunk = 128 << 10
	data := randomBytes(48*chunk-5000, 13)
	sha := shaOf(data)
	disk := newFakeDisk(1 << 40)
	var logged logbuf.Buffer
	open := func(dir string) *Store {
		t.Helper()
		s, err := Open(Options{Dir: dir, ChunkSize: chunk, MaxBytes: 64 << 20, DiskReserve: testReserve,
			FreeSpace: disk.FreeSpace, SpaceCheckInterval: time.Hour, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
		if err != nil {
			t.Fatal(err)
		}
		s.waitCount()
		return s
	}
	s := open(dir)
	put(t, s, data)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	damageOnDisk(t, dir, data[chunk+1000:chunk+1064])

	s = open(dir)
	defer s.Close()
	disk.free.Store(testReserve - 1)
	s.checkSpace()
	if err := s.Writable(); !errors.Is(err, ErrNotWritable) {
		t.Fatalf("Writable below the reserve = %v", err)
	}
	r, err := s.OpenBlob(sha)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(r); !errors.Is(err, ErrDamaged) {
		t.Fatalf("reading the damaged archive: %v, want ErrDamaged", err)
	}
	r.Close()
	if !strings.Contains(logged.String(), "could not be stored") {
		t.Errorf("the mark that could not be stored was not logged:\n%s", logged.String())
	}
	if _, err := s.StatBlob(sha); !errors.Is(err, ErrNotFound) {
		t.Errorf("StatBlob of the archive found damaged on a full disk: %v, want ErrNotFound", err)
	}
	if r, err := s.OpenBlob(sha); !errors.Is(err, ErrNotFound) {
		if err == nil {
			r.Close()
		}
		t.Errorf("OpenBlob of the archive found damaged on a full disk: %v, want ErrNotFound", err)
	}
	if n, total := s.Stats(); n != 1 || total != int64(len(data)) {
		t.Errorf("Stats = %d archives, %d bytes; want the damaged copy kept, 1, %d", n, total, len(data))
	}
	// What a process killed now leaves on disk.
	killed := t.TempDir()
	copyDir(t, dir, killed)

	// Room again: the next writer replaces the damaged copy.
	disk.free.Store(1 << 40)
	s.checkSpace()
	put(t, s, data)
	if r, err := s.OpenBlob(sha); err != nil {
		t.Errorf("the archive committed anew: %v", err)
	} else {
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("the archive committed anew: %v, %d bytes (equal: %v)", err, len(got), bytes.Equal(got, data))
		}
	}

	k := open(killed)
	defer k.Close()
	if r, err := k.OpenBlob(sha); err == nil {
		got, err := io.ReadAll(r)
		r.Close()
		if !errors.Is(err, ErrDamaged) {
			t.Errorf("after a kill, the archive whose mark was not stored read as %d bytes, %v; want ErrDamaged", len(got), err)
		}
	} else if !errors.Is(err, ErrNotFound) {
		t.Errorf("after a kill: OpenBlob %v", err)
	}
	if n, _ := k.Stats(); n != 1 {
		t.Errorf("after a kill: %d archives, want the damaged copy kept", n)
	}
}

// One damaged byte in a value-log file costs the archives stored after it
// in the same file once Badger's value-log GC rewrites that file: it
// reads the file up to the entry that fails its checksum and takes the
// rest as cut short. The store never hands out their bytes wrong: each is
// found damaged when it is next read (a chunk missing from under an
// archive its record still lists), marked and not found, so that it is
// fetched again. docs/operations.md ("Checking the cache") says so.
func TestValueLogGCOverADamagedEntryLosesWhatFollowsIt(t *testing.T) {
	dir := t.TempDir()
	const chunk = 128 << 10 // above the value threshold: chunks go to the value log
	// A size limit of 64 MiB makes the value-log files 4 MiB: the
	// damaged archive and the one after it share the first file, which
	// is not the last (Badger checks the last at Open).
	opts := Options{Dir: dir, ChunkSize: chunk, MaxBytes: 64 << 20}
	damaged := randomBytes(8*chunk, 21)
	after := randomBytes(8*chunk, 22)
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.waitCount()
	put(t, s, damaged)
	put(t, s, after)
	for i := range 40 { // the later files
		put(t, s, randomBytes(4*chunk, uint64(100+i)))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	damageOnDisk(t, dir, damaged[chunk+1000:chunk+1064])

	s, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.waitCount()
	defer s.Close()
	read := func(data []byte) error {
		r, err := s.OpenBlob(shaOf(data))
		if err != nil {
			return err
		}
		defer r.Close()
		got, err := io.ReadAll(r)
		if err == nil && !bytes.Equal(got, data) {
			t.Fatalf("read %d bytes that are not the archive's", len(got))
		}
		return err
	}
	if err := read(after); err != nil {
		t.Fatalf("the archive after the damaged one, before GC: %v", err)
	}
	if err := read(damaged); !errors.Is(err, ErrDamaged) {
		t.Fatalf("the damaged archive: %v, want ErrDamaged", err)
	}
	// Replaced by a verified copy, its damaged chunks are garbage; GC
	// rewrites the file they are in (here, rather than in the store's GC
	// goroutine, stopped first: one caller at a time).
	s.stopGC()
	<-s.gcDone
	put(t, s, damaged)
	if err := s.gc.settleDeletes(); err != nil {
		t.Fatal(err)
	}
	err = s.db.withWritable(func(db *badger.DB) error {
		s.db.writeMu.Lock() // as a round of the store's own GC holds it
		defer s.db.writeMu.Unlock()
		return db.RunValueLogGC(0.01)
	})
	if err != nil {
		t.Fatalf("value-log GC: %v", err)
	}
	if err := read(after); !errors.Is(err, ErrDamaged) {
		t.Fatalf("the archive after the damaged entry, once GC rewrote its file: %v, want ErrDamaged (Badger no longer drops what follows a damaged entry? then docs/operations.md must change)", err)
	}
	if _, err := s.StatBlob(shaOf(after)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("StatBlob of the archive lost by GC: %v, want ErrNotFound", err)
	}
	if err := read(damaged); err != nil {
		t.Fatalf("the verified copy that replaced the damaged one: %v", err)
	}
}
