package cache

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// Writers (committing, aborting, failing to stage, with followers reading
// as they write), readers, evictions and deletions of a few archives of
// the sizes at chunk boundaries, all at once: every byte read is the
// archive's, and once all are closed the counters are those of the
// records, nothing is counted as being staged, no reference is held and
// no chunk is orphaned.
func TestStressAccounting(t *testing.T) {
	var fail atomic.Bool
	s, err := Open(Options{InMemory: true, ChunkSize: testChunk, MaxBytes: 6 * testChunk,
		FailWrites: func() error {
			if fail.Load() && rand.IntN(8) == 0 {
				return ErrNotWritable
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.waitCount()
	fail.Store(true)
	sizes := []int{0, 1, testChunk - 1, testChunk, testChunk + 1, 2*testChunk + 5}
	var datas [][]byte
	for i, n := range sizes {
		datas = append(datas, randomBytes(n, uint64(500+i)))
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 9))
			for range 300 {
				data := datas[r.IntN(len(datas))]
				sha := shaOf(data)
				switch op := r.IntN(11); {
				case op < 4:
					w, err := s.NewBlobWriter(sha)
					if err != nil {
						t.Error(err)
						return
					}
					f := w.Follow()
					for rest := data; len(rest) > 0; {
						n := min(len(rest), 1+r.IntN(700))
						w.Write(rest[:n])
						rest = rest[n:]
						got := make([]byte, w.Written())
						if n, err := f.ReadAt(got, 0); err == nil && !bytes.Equal(got[:n], data[:n]) {
							t.Errorf("follower read wrong bytes of %d-byte archive", len(data))
						}
					}
					switch r.IntN(4) {
					case 0:
						w.Abort()
					default:
						w.Commit("h1:x")
					}
					f.Close()
					w.Close()
				case op < 8:
					b, err := s.OpenBlob(sha)
					if err != nil {
						continue
					}
					got, err := io.ReadAll(b)
					if err == nil && !bytes.Equal(got, data) {
						t.Errorf("read %d bytes of a %d-byte archive, not its bytes", len(got), len(data))
					}
					b.Close()
				case op < 9:
					_ = op
					if _, err := s.EvictBlob(sha); err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrInUse) {
						t.Errorf("EvictBlob: %v", err)
					}
				case r.IntN(2) == 0:
					RigOf(s).MarkDamaged(sha)
				default:
					s.settle()
				}
			}
		}()
	}
	wg.Wait()
	fail.Store(false)
	s.settle()

	var n int
	var total int64
	if err := s.ScanBlobs(func(_ string, size int64) error { n++; total += size; return nil }); err != nil {
		t.Fatal(err)
	}
	if gotN, gotTotal := s.Stats(); gotN != n || gotTotal != total {
		t.Errorf("Stats = %d archives, %d bytes; the records are %d, %d", gotN, gotTotal, n, total)
	}
	marked := 0
	RigOf(s).scanRecords(func(rec blobRecord) error {
		if rec.Damaged {
			marked++
		}
		return nil
	})
	if got := s.DamagedArchives(); got != marked {
		t.Errorf("DamagedArchives = %d, the records marked are %d", got, marked)
	}
	if st := s.staging.Load(); st != 0 {
		t.Errorf("staging = %d bytes with every writer closed, want 0", st)
	}
	if u := s.writers.unstaged; u != 0 {
		t.Errorf("unstaged = %d bytes with every writer closed, want 0", u)
	}
	if o := s.writers.open(); o != 0 {
		t.Errorf("%d writers open, want 0", o)
	}
	s.evict.lru.mu.Lock()
	for sha, e := range s.evict.lru.entries {
		if e.refs != 0 || e.evicting {
			t.Errorf("LRU entry %s: refs %d, evicting %v with nothing open", sha, e.refs, e.evicting)
		}
	}
	s.evict.lru.mu.Unlock()
	if removed, err := s.CleanOrphans(); err != nil || removed != 0 {
		t.Errorf("CleanOrphans removed %d chunks (%v) with every writer closed, want 0", removed, err)
	}
}
