package cache

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
)

// A pass that deletes many archives at once, while readers open them, a
// removal (EvictBlob) takes some of them too, and writers commit some of
// them again: every archive deleted is told once to OnEvict or returned by
// EvictBlob (or both, when EvictBlob waited for the pass's deletion), none
// is told twice, readers read either the whole archive or a miss, and the
// counters and chunks match what is left.
func TestEvictionBatchRacingReadersAndRemovals(t *testing.T) {
	const (
		size = testChunk * 3
		n    = 40
		keep = 4
	)
	var logged logbuf.Buffer
	var mu sync.Mutex
	var evicted []string
	s := openEvicting(t, Options{MaxBytes: keep * size}, &logged, &mu, &evicted)
	s.SetEvictable(func(string) bool { return false })
	datas := make(map[string][]byte)
	var shas []string
	for i := range n {
		d := randomBytes(size, uint64(1000+i))
		put(t, s, d)
		datas[shaOf(d)] = d
		shas = append(shas, shaOf(d))
	}
	s.settle()
	if a, _ := s.Stats(); a != n {
		t.Fatalf("%d archives before the pass, want %d", a, n)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var readErrs atomic.Int64
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(r), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				sha := shas[rnd.IntN(n)]
				br, err := s.OpenBlob(sha)
				if errors.Is(err, ErrNotFound) {
					continue
				}
				if err != nil {
					readErrs.Add(1)
					t.Errorf("OpenBlob: %v", err)
					return
				}
				got, err := io.ReadAll(io.NewSectionReader(br, 0, size))
				br.Close()
				if err != nil || !bytes.Equal(got, datas[sha]) {
					readErrs.Add(1)
					t.Errorf("read %d bytes of %s (%v), not the archive", len(got), sha[:8], err)
					return
				}
			}
		}()
	}
	var removedMu sync.Mutex
	removed := map[string]int{}
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := r; i < n; i += 3 {
				info, err := s.EvictBlob(shas[i])
				switch {
				case err == nil:
					if info.SHA256 != shas[i] {
						t.Errorf("EvictBlob(%s) returned %s", shas[i][:8], info.SHA256)
					}
					removedMu.Lock()
					removed[shas[i]]++
					removedMu.Unlock()
				case errors.Is(err, ErrNotFound), errors.Is(err, ErrInUse):
				default:
					t.Errorf("EvictBlob: %v", err)
				}
			}
		}()
	}
	s.SetEvictable(nil)
	s.evict.kick()
	time.Sleep(50 * time.Millisecond)
	close(stop)
	wg.Wait()
	if err := s.EvictNow(t.Context()); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	seen := map[string]int{}
	for _, sha := range evicted {
		seen[sha]++
		if seen[sha] > 1 {
			t.Errorf("OnEvict told twice of %s", sha[:8])
		}
	}
	gone := 0
	for _, sha := range shas {
		_, err := s.StatBlob(sha)
		cachedNow := err == nil
		if !cachedNow {
			gone++
			if seen[sha] == 0 && removed[sha] == 0 {
				t.Errorf("%s is gone, told to no one", sha[:8])
			}
		} else if seen[sha] > 0 || removed[sha] > 0 {
			t.Errorf("%s is cached, but was told deleted (evicted %d, removed %d)", sha[:8], seen[sha], removed[sha])
		}
	}
	archives, total := s.Stats()
	if archives != n-gone || total != int64(archives)*size {
		t.Errorf("Stats = %d archives, %d bytes; %d are left", archives, total, n-gone)
	}
	if total > keep*size {
		t.Errorf("%d bytes left, over the limit of %d", total, keep*size)
	}
	if c, err := RigOf(s).ChunkCount(); err != nil || c != archives*3 {
		t.Errorf("%d chunks (%v), want %d", c, err, archives*3)
	}
	if strings.Contains(logged.String(), "evicting archive") {
		t.Errorf("the pass failed:\n%s", logged.String())
	}
}

// Close while a pass deletes a batch waits for every deletion of the
// batch; none runs on the closed database, and every archive the pass
// deleted, and only those, was told to OnEvict, as a reopen shows.
func TestCloseWaitsForTheWholeBatch(t *testing.T) {
	const size = testChunk * 2
	dir := t.TempDir()
	var mu sync.Mutex
	var evicted []string
	s, err := Open(Options{Dir: dir, ChunkSize: testChunk, MaxBytes: 2 * size,
		OnEvict: recordEvictions(&mu, &evicted)})
	if err != nil {
		t.Fatal(err)
	}
	s.waitCount()
	s.SetEvictable(func(string) bool { return false })
	var shas []string
	for i := range 12 {
		d := randomBytes(size, uint64(2000+i))
		put(t, s, d)
		shas = append(shas, shaOf(d))
	}
	var entered atomic.Int32
	release := make(chan struct{})
	all := make(chan struct{})
	s.hooks.evicting = func(string) {
		if entered.Add(1) == 10 {
			close(all)
		}
		<-release
	}
	stopping := make(chan struct{})
	s.hooks.evictStopWaits = func() { close(stopping) }
	s.SetEvictable(nil)
	s.evict.kick()
	select {
	case <-all:
	case <-time.After(30 * time.Second):
		t.Fatalf("%d deletions started, want the 10 over the limit at once", entered.Load())
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	<-stopping
	time.Sleep(20 * time.Millisecond)
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while the batch was deleting", err)
	default:
	}
	close(release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if got := entered.Load(); got != 10 {
		t.Errorf("%d deletions started, want 10", got)
	}

	s2, err := Open(Options{Dir: dir, ChunkSize: testChunk})
	if err != nil {
		t.Fatal(err)
	}
	s2.waitCount()
	defer s2.Close()
	mu.Lock()
	defer mu.Unlock()
	told := map[string]bool{}
	for _, sha := range evicted {
		if told[sha] {
			t.Errorf("OnEvict told twice of %s", sha[:8])
		}
		told[sha] = true
	}
	for _, sha := range shas {
		_, err := s2.StatBlob(sha)
		if gone := errors.Is(err, ErrNotFound); gone != told[sha] {
			t.Errorf("%s: gone %v, told to OnEvict %v", sha[:8], gone, told[sha])
		}
	}
	if a, _ := s2.Stats(); a != 2 {
		t.Errorf("%d archives after the reopen, want 2", a)
	}
}
