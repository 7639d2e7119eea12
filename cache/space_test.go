package cache

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
)

const testReserve = 64 << 20

// fakeDisk is a FreeSpace function whose answer the test sets; it counts
// how often it is asked.
type fakeDisk struct {
	free  atomic.Int64
	calls atomic.Int64
}

func newFakeDisk(free int64) *fakeDisk {
	d := &fakeDisk{}
	d.free.Store(free)
	return d
}

func (d *fakeDisk) FreeSpace(string) (int64, error) {
	d.calls.Add(1)
	return d.free.Load(), nil
}

// openSpace opens a store on dir whose free space is disk's. The watcher's
// interval is long: the tests run its rounds themselves (checkSpace).
func openSpace(t *testing.T, dir string, disk *fakeDisk) *Store {
	t.Helper()
	s, err := Open(Options{Dir: dir, ChunkSize: testChunk, DiskReserve: testReserve,
		FreeSpace: disk.FreeSpace, SpaceCheckInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s.waitCount()
	t.Cleanup(func() { s.Close() })
	return s
}

// commitVersion is the newest commit timestamp in Badger: it changes with
// every write that reaches the database.
func commitVersion(s *Store) uint64 {
	s.db.dbmu.RLock()
	defer s.db.dbmu.RUnlock()
	return s.db.bdb.MaxVersion()
}

func TestBelowReserveNothingIsWritten(t *testing.T) {
	disk := newFakeDisk(1 << 30)
	s := openSpace(t, t.TempDir(), disk)
	if err := s.PutMeta("versions/a", 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Writable(); err != nil {
		t.Fatalf("Writable with room: %v", err)
	}

	disk.free.Store(testReserve - 1)
	s.checkSpace()
	version, calls := commitVersion(s), disk.calls.Load()

	if err := s.Writable(); !errors.Is(err, ErrNotWritable) {
		t.Errorf("Writable below the reserve = %v, want ErrNotWritable", err)
	}
	if err := s.Ping(); !errors.Is(err, ErrNotWritable) {
		t.Errorf("Ping below the reserve = %v, want ErrNotWritable", err)
	}
	if err := s.PutMeta("versions/b", 2); !errors.Is(err, ErrNotWritable) {
		t.Errorf("PutMeta below the reserve = %v, want ErrNotWritable", err)
	}
	if err := s.DeleteMeta("versions/a"); !errors.Is(err, ErrNotWritable) {
		t.Errorf("DeleteMeta below the reserve = %v, want ErrNotWritable", err)
	}
	data := randomBytes(testChunk*3+17, 1)
	w, err := s.NewBlobWriter(shaOf(data))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Err(); !errors.Is(err, ErrNotWritable) {
		t.Errorf("writer's Err below the reserve = %v, want ErrNotWritable", err)
	}
	got := make([]byte, len(data))
	if n, err := followAt(w, got, 0); n != len(data) || !bytes.Equal(got, data) {
		t.Errorf("readers of the writer got %d bytes (%v), want every byte", n, err)
	}
	if _, err := w.Commit("h1:x"); !errors.Is(err, ErrNotWritable) {
		t.Errorf("Commit below the reserve = %v, want ErrNotWritable", err)
	}
	w.Close()

	if v := commitVersion(s); v != version {
		t.Errorf("Badger's commit version went from %d to %d: something was written below the reserve", version, v)
	}
	if c := disk.calls.Load(); c != calls {
		t.Errorf("free space asked %d times by writes refused below the reserve, want 0 (no statfs per write)", c-calls)
	}
	var v int
	if _, err := s.GetMeta("versions/a", &v); err != nil || v != 1 {
		t.Errorf("reading below the reserve: %v, %v", v, err)
	}

	// Space returns: writable again without reopening, and what the
	// failed writer staged before is gone.
	disk.free.Store(1 << 30)
	s.checkSpace()
	if err := s.Writable(); err != nil {
		t.Fatalf("Writable after space returned: %v", err)
	}
	if err := s.PutMeta("versions/b", 2); err != nil {
		t.Errorf("PutMeta after space returned: %v", err)
	}
	put(t, s, data)
	if got := chunkCount(t, s); got != 4 {
		t.Errorf("%d chunks, want the 4 of the committed archive", got)
	}
}

// A write asks the file system again when its last answer is older than
// the interval, and that answer stops it before Badger is touched.
func TestStaleFreeSpaceIsCheckedBeforeWriting(t *testing.T) {
	disk := newFakeDisk(1 << 30)
	s := openSpace(t, t.TempDir(), disk)
	now := time.Now()
	var mu sync.Mutex
	// No other goroutine asks the clock: the watcher's interval is long,
	// and the count that Open started has ended (openSpace).
	s.db.space.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	if err := s.PutMeta("versions/a", 1); err != nil {
		t.Fatal(err)
	}
	disk.free.Store(testReserve / 2)
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	version := commitVersion(s)
	if err := s.PutMeta("versions/b", 2); !errors.Is(err, ErrNotWritable) {
		t.Errorf("PutMeta after the disk filled = %v, want ErrNotWritable", err)
	}
	if v := commitVersion(s); v != version {
		t.Error("the write reached Badger")
	}
}

// Writes admitted since the last statfs count: a burst cannot overrun the
// reserve between two checks.
func TestAdmittedBytesAreAccounted(t *testing.T) {
	disk := newFakeDisk(1 << 30)
	s := openSpace(t, t.TempDir(), disk)
	disk.free.Store(testReserve + 10*testChunk)
	s.checkSpace()
	// The fake disk does not shrink as writes land, so each refusal by
	// the accounting is followed by one statfs (which finds the room
	// again); count the statfs calls a burst of admissions causes.
	calls := disk.calls.Load()
	for range 100 {
		if err := s.db.space.Admit(testChunk); err != nil {
			t.Fatal(err)
		}
		s.db.space.Done(testChunk)
	}
	// About one statfs per 10 chunks admitted.
	if c := disk.calls.Load() - calls; c < 9 || c > 11 {
		t.Errorf("%d statfs calls for 100 chunks with room for 10, want about 10", c)
	}
}

// snapshot lists every file under dir with its size and modification time.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := make(map[string]string)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		m[p] = fmt.Sprint(fi.ModTime(), " ", fi.Size())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestOpenBelowReserveIsReadOnly(t *testing.T) {
	dir := t.TempDir()
	disk := newFakeDisk(1 << 30)
	s, err := Open(Options{Dir: dir, ChunkSize: testChunk, DiskReserve: testReserve, FreeSpace: disk.FreeSpace})
	if err != nil {
		t.Fatal(err)
	}
	data := randomBytes(testChunk*5+3, 2)
	put(t, s, data)
	if err := s.PutMeta("versions/a", 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	disk.free.Store(testReserve - 1)
	before := snapshot(t, dir)
	s = openSpace(t, dir, disk)
	if err := s.Writable(); !errors.Is(err, ErrNotWritable) {
		t.Errorf("Writable after opening below the reserve = %v", err)
	}
	if !s.db.readOnly {
		t.Error("not opened read-only")
	}
	b, err := s.OpenBlob(shaOf(data))
	if err != nil {
		t.Fatalf("cached archive not served read-only: %v", err)
	}
	got, err := io.ReadAll(b)
	b.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("reading the archive read-only: %v", err)
	}
	var v int
	if _, err := s.GetMeta("versions/a", &v); err != nil || v != 1 {
		t.Errorf("metadata read-only: %v, %v", v, err)
	}
	if err := s.PutMeta("versions/b", 2); !errors.Is(err, ErrNotWritable) {
		t.Errorf("PutMeta read-only = %v, want ErrNotWritable", err)
	}
	if n, total := s.Stats(); n != 1 || total != int64(len(data)) {
		t.Errorf("Stats read-only = %d, %d", n, total)
	}
	after := snapshot(t, dir)
	for p, st := range after {
		if before[p] != st {
			t.Errorf("%s was written (or created) by opening below the reserve", p)
		}
	}

	disk.free.Store(1 << 30)
	s.checkSpace()
	if err := s.Writable(); err != nil {
		t.Fatalf("Writable after space returned: %v", err)
	}
	if err := s.PutMeta("versions/b", 2); err != nil {
		t.Errorf("PutMeta after reopening: %v", err)
	}
	other := randomBytes(testChunk*2, 3)
	put(t, s, other)
	readBlob(t, s, data)
	readBlob(t, s, other)
}

// After a crash Badger cannot open read-only (its write-ahead log needs
// replaying): the store then has no database, misses every lookup and
// writes nothing, until there is room.
func TestOpenBelowReserveAfterCrash(t *testing.T) {
	dir := t.TempDir()
	disk := newFakeDisk(1 << 30)
	s := openSpace(t, dir, disk)
	data := randomBytes(testChunk*4, 4)
	put(t, s, data)
	// The files as a crash would leave them: copied while open.
	crashed := t.TempDir()
	copyDir(t, dir, crashed)

	disk.free.Store(testReserve - 1)
	before := snapshot(t, crashed)
	s2 := openSpace(t, crashed, disk)
	if err := s2.Writable(); !errors.Is(err, ErrNotWritable) {
		t.Errorf("Writable = %v, want ErrNotWritable", err)
	}
	if _, err := s2.StatBlob(shaOf(data)); !errors.Is(err, ErrNotFound) {
		t.Errorf("StatBlob without a database = %v, want ErrNotFound", err)
	}
	if _, err := s2.OpenBlob(shaOf(data)); !errors.Is(err, ErrNotFound) {
		t.Errorf("OpenBlob without a database = %v, want ErrNotFound", err)
	}
	if err := s2.PutMeta("versions/a", 1); !errors.Is(err, ErrNotWritable) {
		t.Errorf("PutMeta without a database = %v, want ErrNotWritable", err)
	}
	if err := s2.Ping(); !errors.Is(err, ErrNotWritable) {
		t.Errorf("Ping without a database = %v, want ErrNotWritable", err)
	}
	for p, st := range snapshot(t, crashed) {
		if before[p] != st {
			t.Errorf("%s was written by opening below the reserve", p)
		}
	}

	disk.free.Store(1 << 30)
	s2.checkSpace()
	if err := s2.Writable(); err != nil {
		t.Fatalf("Writable after space returned: %v", err)
	}
	readBlob(t, s2, data) // the absence seen before is not remembered
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCrashedBelowReserveLeavesNothingRunning: a store opened below the
// reserve on a directory whose write-ahead log needs replaying (a crash)
// has no database until there is room, and once closed leaves nothing
// of Badger's running: Badger's read-only Open, which refuses such a
// directory, would leave its goroutines and caches behind at every
// refusal, so it is not asked.
func TestCrashedBelowReserveLeavesNothingRunning(t *testing.T) {
	data := randomBytes(testChunk*2, 5)
	crashed := crashedCopy(t, data)
	before := goleak.IgnoreCurrent()
	disk := newFakeDisk(testReserve - 1)
	s, err := Open(Options{Dir: crashed, ChunkSize: testChunk, DiskReserve: testReserve,
		FreeSpace: disk.FreeSpace, SpaceCheckInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s.waitCount()
	if s.db.bdb != nil {
		t.Fatal("a database was opened on a directory needing its log replayed, below the reserve")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, before)
}

// TestFailedReopenBacksOff: once there is room, a database that cannot
// be opened read-write (its directory damaged) is tried again at growing
// intervals, not at every free-space check (each second by default): each
// try logs an error, and each failed Badger open leaves what it started
// running. Ten checks in a row try once.
func TestFailedReopenBacksOff(t *testing.T) {
	crashed := crashedCopy(t, randomBytes(testChunk*2, 6))
	// The manifest damaged: no open of it succeeds.
	if err := os.WriteFile(filepath.Join(crashed, "MANIFEST"), []byte("not a manifest"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs logbuf.Buffer
	disk := newFakeDisk(testReserve - 1)
	s, err := Open(Options{Dir: crashed, ChunkSize: testChunk, DiskReserve: testReserve,
		FreeSpace: disk.FreeSpace, SpaceCheckInterval: time.Hour, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.waitCount()
	disk.free.Store(1 << 30)
	for range 10 {
		s.checkSpace()
	}
	if n := strings.Count(logs.String(), "opening the cache read-write now that there is room"); n != 1 {
		t.Errorf("%d tries to open the damaged database in ten checks, want 1:\n%s", n, logs.String())
	}
}

// roomForRecordOnly leaves the store on disk room for the deletion of
// one commit record above its reserve, not for that of an archive's
// chunks as well.
func roomForRecordOnly(s *Store, disk *fakeDisk) {
	s.checkSpace() // the reserve as it stands (the LSM tree's size)
	disk.free.Store(s.Reserve() + entryCost(len(blobKey(strings.Repeat("0", 64))), 0) + 100)
	s.checkSpace()
}

// An archive whose record was deleted, when the disk then had no room
// left for the deletion of its chunks, is deleted: EvictBlob returns what
// it deleted (a prune counts it removed), the store no longer counts it,
// and its chunks, which nothing names, are removed once there is room.
func TestEvictBlobWhoseChunksCannotBeDeletedYet(t *testing.T) {
	disk := newFakeDisk(1 << 30)
	s := openSpace(t, t.TempDir(), disk)
	data := randomBytes(testChunk*8, 3)
	put(t, s, data)
	roomForRecordOnly(s, disk)

	info, err := s.EvictBlob(shaOf(data))
	if err != nil || info.Size != int64(len(data)) {
		t.Errorf("EvictBlob with room for the record's deletion only: %+v, %v; want the archive deleted", info, err)
	}
	if _, err := s.StatBlob(shaOf(data)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("StatBlob after EvictBlob: %v, want ErrNotFound", err)
	}
	if archives, total := s.Stats(); archives != 0 || total != 0 {
		t.Errorf("Stats = %d archives, %d bytes; want none", archives, total)
	}

	disk.free.Store(1 << 30)
	s.checkSpace()
	if n, err := RigOf(s).ChunkCount(); err != nil || n != 0 {
		t.Errorf("%d chunks left once there was room (%v), want 0", n, err)
	}
}

// The size limit's eviction of an archive whose record it deleted, when
// the disk then had no room for the deletion of its chunks, is an
// eviction: counted (Options.OnEvict, the evictions metric), and the
// archives are within the limit.
func TestEvictionWhoseChunksCannotBeDeletedYet(t *testing.T) {
	const size = testChunk * 8
	disk := newFakeDisk(1 << 30)
	var logged logbuf.Buffer
	var mu sync.Mutex
	var evicted []string
	s, err := Open(Options{Dir: t.TempDir(), ChunkSize: testChunk, DiskReserve: testReserve,
		FreeSpace: disk.FreeSpace, SpaceCheckInterval: time.Hour, MaxBytes: 2 * size,
		Evictable: func(string) bool { return false }, // nothing, until the test says
		Logger:    slog.New(slog.NewTextHandler(&logged, nil)),
		OnEvict:   recordEvictions(&mu, &evicted)})
	if err != nil {
		t.Fatal(err)
	}
	s.waitCount()
	t.Cleanup(func() { s.Close() })
	a, b, c := randomBytes(size, 4), randomBytes(size, 5), randomBytes(size, 6)
	put(t, s, a)
	put(t, s, b)
	put(t, s, c)
	roomForRecordOnly(s, disk)

	s.SetEvictable(nil)
	if err := s.EvictNow(t.Context()); err != nil {
		t.Fatal(err)
	}
	if cached(s, a) {
		t.Fatal("a, the least recently used, was not evicted")
	}
	mu.Lock()
	if len(evicted) != 1 || evicted[0] != shaOf(a) {
		t.Errorf("OnEvict told of %d archives (a: %v), want a", len(evicted), slices.Contains(evicted, shaOf(a)))
	}
	mu.Unlock()
	if archives, total := s.Stats(); archives != 2 || total != 2*size {
		t.Errorf("Stats = %d archives, %d bytes; want b and c", archives, total)
	}
	if strings.Contains(logged.String(), `msg="evicting archive"`) {
		t.Errorf("the eviction of a was logged as failed:\n%s", logged.String())
	}
}
