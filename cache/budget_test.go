package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/tfmirror/tfmirror/v2/cache/internal/disk"
)

// While archives churn through a size-limited cache (several writers at
// once, four times the limit in all, faster than value-log GC returns the
// space of the evicted ones), the data directory never holds more than
// 1.25 times the limit plus the reserve, and every archive still cached
// reads back intact.
func TestDiskBudgetUnderChurn(t *testing.T) {
	const (
		limit   = 16 << 20
		reserve = 8 << 20
		size    = 1 << 20
		writers = 4
		rounds  = 4 // times the limit written
	)
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, MaxBytes: limit, DiskReserve: reserve})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.budget.wait = 2 * time.Second // what GC achieves in time depends on the machine's load
	ctx, cancel := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	bound := int64(limit + limit/4 + reserve)
	var most int64
	var breakdown string
	bg.Go(func() {
		for ctx.Err() == nil {
			if n := dataDirBytes(dir); n > most {
				most = n
				breakdown = dirBreakdown(dir)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})

	var mu sync.Mutex
	blobs := map[string][]byte{}
	var notCached int
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range rounds * limit / size / writers {
				b := make([]byte, size)
				rand.NewChaCha8([32]byte{byte(g), byte(i)}).Read(b)
				sha := shaOf(b)
				w, err := s.NewBlobWriter(sha)
				if err != nil {
					t.Error(err)
					return
				}
				w.Write(b)
				_, err = w.Commit("")
				w.Close()
				mu.Lock()
				switch {
				case err == nil:
					blobs[sha] = b
				case errors.Is(err, ErrOverBudget):
					notCached++
				default:
					t.Errorf("commit: %v", err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// Once the churn is over, the space comes back and the next archive
	// is cached.
	b := make([]byte, size)
	rand.NewChaCha8([32]byte{0xff}).Read(b)
	s.budget.wait = time.Minute
	if err := putErr(s, b); err != nil {
		t.Errorf("an archive after the churn: %v", err)
	}
	cancel()
	bg.Wait()
	waits, refused := s.BudgetStats()
	t.Logf("%d MiB written by %d writers through a %d MiB limit: the data directory held at most %d MiB (bound %d MiB); %d chunk writes waited for room, %d archives not cached",
		rounds*limit>>20, writers, limit>>20, most>>20, bound>>20, waits, notCached)
	t.Log(breakdown)
	if most > bound {
		t.Errorf("the data directory held %d MiB, over 1.25 × the %d MiB limit + the %d MiB reserve = %d MiB", most>>20, limit>>20, reserve>>20, bound>>20)
	}
	if refused != int64(notCached) && notCached > 0 {
		t.Errorf("%d archives not cached, but %d chunk writes were refused", notCached, refused)
	}
	if len(blobs) < limit/size {
		t.Errorf("only %d archives cached (%d not, for the budget): fewer than the limit holds", len(blobs), notCached)
	}
	for sha, b := range blobs {
		r, err := s.OpenBlob(sha)
		if errors.Is(err, ErrNotFound) {
			continue // evicted
		}
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("archive %s reads back wrong: %v", sha, err)
		}
	}
}

// An archive that cannot fit in the budget (larger than 1.25 times the
// limit plus the reserve) is not cached, after a bounded wait; its reader
// still gets every byte, and the store takes the next archive that fits.
func TestDiskBudgetRefusesWhatCannotFit(t *testing.T) {
	const (
		limit   = 16 << 20
		reserve = 1 << 20
	)
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, MaxBytes: limit, DiskReserve: reserve})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.budget.wait = 100 * time.Millisecond
	if used, budget, ok := s.DiskBudget(); !ok || budget != limit+limit/4+reserve || used <= 0 || used > budget {
		t.Fatalf("DiskBudget() = %d, %d, %v; want a size within the budget of %d", used, budget, ok, limit+limit/4+reserve)
	}

	big := make([]byte, 3*limit)
	rand.NewChaCha8([32]byte{1}).Read(big)
	w, err := s.NewBlobWriter(shaOf(big))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(big)
	got := make([]byte, len(big))
	if _, err := followAt(w, got, 0); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("reading the download back: %v", err)
	}
	if _, err := w.Commit(""); !errors.Is(err, ErrOverBudget) || !errors.Is(err, ErrNotWritable) {
		t.Fatalf("Commit of an archive larger than the budget: %v, want ErrOverBudget (and ErrNotWritable)", err)
	}
	w.Close()
	if waits, refused := s.BudgetStats(); waits != 1 || refused != 1 {
		t.Errorf("%d waits and %d refused writes counted, want 1 and 1: only the first chunk over the budget waits", waits, refused)
	}

	// The refused archive's space comes back through value-log GC, in a
	// second or two, on one core starved by busy loops too: the next
	// archive waits for it as long as a verdict needs, not the short wait
	// above. A minute is a stall, which a longer wait would not end: the
	// failure says what the data directory holds, and whether deletions
	// are left uncounted (TestDiskBudgetSpaceBackAfterAnOlderRead).
	s.budget.mu.Lock()
	s.budget.wait = time.Minute
	s.budget.mu.Unlock()
	small := make([]byte, limit/2)
	rand.NewChaCha8([32]byte{2}).Read(small)
	if err := putErr(s, small); err != nil {
		t.Fatalf("an archive that fits after the refused one: %v; deletions left uncounted: %v; the data directory:%s",
			err, s.gc.uncounted(), dirBreakdown(dir))
	}
}

// dirBreakdown lists the files in dir with the KiB each takes on disk and
// its size in KiB.
func dirBreakdown(dir string) string {
	var b string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if fi, err := e.Info(); err == nil {
			b += fmt.Sprintf(" %s:%d/%d", e.Name(), disk.Allocated(fi)>>10, fi.Size()>>10)
		}
	}
	return b
}

// Badger counts a deleted value as garbage only at a compaction that runs
// once every read older than the deletion has ended: a settle while one
// is under way (a read of another archive, a scan, the count at Open)
// counts none of what was deleted since it began. When the archive
// refused for the budget is deleted under such a read, its space still
// comes back once the read has ended, though nothing else is deleted, and
// the next archive that fits is cached.
func TestDiskBudgetSpaceBackAfterAnOlderRead(t *testing.T) {
	const (
		limit   = 16 << 20
		reserve = 1 << 20
	)
	s, err := Open(Options{Dir: t.TempDir(), MaxBytes: limit, DiskReserve: reserve})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	settled := make(chan struct{}, 1)
	s.hooks.settled = func() {
		select {
		case settled <- struct{}{}:
		default:
		}
	}
	s.budget.wait = 100 * time.Millisecond
	big := make([]byte, 3*limit)
	rand.NewChaCha8([32]byte{1}).Read(big)
	w, err := s.NewBlobWriter(shaOf(big))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(big)
	if _, err := w.Commit(""); !errors.Is(err, ErrOverBudget) {
		t.Fatalf("Commit of an archive larger than the budget: %v, want ErrOverBudget", err)
	}

	reading, release, read := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		read <- s.db.view(func(*badger.Txn) error {
			close(reading)
			<-release
			return nil
		})
	}()
	<-reading
	w.Close() // deletes what the refused archive staged
	select {
	case <-settled:
	case <-time.After(time.Minute):
		t.Fatal("no settle within a minute of the deletion")
	}
	if !s.gc.uncounted() {
		t.Fatal("a settle under a read older than the deletion counted it: this test no longer shows what it is for")
	}
	close(release)
	if err := <-read; err != nil {
		t.Fatal(err)
	}

	// The space comes back within a second or two; a minute is a stall.
	s.budget.mu.Lock()
	s.budget.wait = time.Minute
	s.budget.mu.Unlock()
	small := make([]byte, limit/2)
	rand.NewChaCha8([32]byte{2}).Read(small)
	if err := putErr(s, small); err != nil {
		t.Fatalf("an archive that fits, once the read has ended: %v", err)
	}
}

// A data directory reopened with archives in it is held to its budget
// from the first write: the budget starts from the directory as it is,
// not from nothing, so the archives written after a restart (while those
// they evict have not returned their space yet) do not take it over 1.25
// times the limit plus the reserve.
func TestDiskBudgetAfterReopen(t *testing.T) {
	const (
		limit   = 16 << 20
		reserve = 8 << 20
		size    = 1 << 20
	)
	dir := t.TempDir()
	opts := Options{Dir: dir, MaxBytes: limit, DiskReserve: reserve}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	put := func(s *Store, seed byte, i int) error {
		b := make([]byte, size)
		rand.NewChaCha8([32]byte{seed, byte(i)}).Read(b)
		return putErr(s, b)
	}
	for i := range limit/size - 1 {
		if err := put(s, 1, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := dataDirBytes(dir)

	s, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Stats() // counted
	s.budget.wait = 2 * time.Second
	bound := int64(limit + limit/4 + reserve)
	most := before
	for i := range 2 * limit / size {
		if err := put(s, 2, i); err != nil && !errors.Is(err, ErrOverBudget) {
			t.Fatalf("commit: %v", err)
		}
		most = max(most, dataDirBytes(dir))
	}
	t.Logf("reopened at %d MiB; %d MiB written through the %d MiB limit; the data directory held at most %d MiB (bound %d MiB)",
		before>>20, 2*limit>>20, limit>>20, most>>20, bound>>20)
	if most > bound {
		t.Errorf("after a reopen, the data directory held %d MiB, over 1.25 × the %d MiB limit + the %d MiB reserve = %d MiB\n%s",
			most>>20, limit>>20, reserve>>20, bound>>20, dirBreakdown(dir))
	}
}

// A store opened read-only (the disk below its reserve at start-up) on a
// data directory over its disk budget refuses an archive's chunks at once,
// as not writable: nothing it could wait for (an eviction, a GC round)
// runs while it is read-only, and a download whose archive it cannot
// store must not be held for the budget's wait.
func TestReadOnlyOverBudgetRefusesAtOnce(t *testing.T) {
	const (
		limit   = 16 << 20
		reserve = 8 << 20
		size    = 1 << 20
	)
	dir := t.TempDir()
	disk := newFakeDisk(1 << 40)
	opts := Options{Dir: dir, ChunkSize: 64 << 10, MaxBytes: limit, DiskReserve: reserve,
		FreeSpace: disk.FreeSpace, SpaceCheckInterval: time.Hour,
		// Kept: the directory holds more than the limit, as retention
		// keeps what cannot be fetched again.
		Evictable: func(string) bool { return false }}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.waitCount()
	for i := range 32 {
		b := make([]byte, size)
		rand.NewChaCha8([32]byte{9, byte(i)}).Read(b)
		if err := putErr(s, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	disk.free.Store(reserve / 2)
	s, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.waitCount()
	if err := s.Writable(); !errors.Is(err, ErrNotWritable) {
		t.Fatalf("Writable below the reserve at open = %v", err)
	}
	if used, budget, _ := s.DiskBudget(); used <= budget {
		t.Fatalf("the directory (%d bytes) is within its budget (%d): nothing to show", used, budget)
	}
	b := make([]byte, size)
	rand.NewChaCha8([32]byte{10}).Read(b)
	start := time.Now()
	err = putErr(s, b)
	if took := time.Since(start); took > budgetWait/2 {
		t.Errorf("an archive written to a read-only store took %s to be refused (%v)", took, err)
	}
	if !errors.Is(err, ErrNotWritable) {
		t.Errorf("writing to a read-only store: %v, want ErrNotWritable", err)
	}
}
