package cache

import (
	"errors"
	"sync"
	"testing"
)

// StatBlob remembers its answers; commits and deletes must still show.
func TestStatBlobFollowsCommitAndDelete(t *testing.T) {
	s := openTest(t, "")
	data := randomBytes(testChunk*3, 9)
	sha := shaOf(data)
	for range 2 { // the second answer comes from memory
		if _, err := s.StatBlob(sha); !errors.Is(err, ErrNotFound) {
			t.Fatalf("StatBlob before commit: %v, want ErrNotFound", err)
		}
	}
	put(t, s, data)
	for range 2 {
		info, err := s.StatBlob(sha)
		if err != nil {
			t.Fatalf("StatBlob after commit: %v", err)
		}
		if info.SHA256 != sha || info.Size != int64(len(data)) || info.H1 != "h1:test" {
			t.Fatalf("StatBlob after commit = %+v", info)
		}
	}
	if err := s.DeleteBlob(sha); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.StatBlob(sha); !errors.Is(err, ErrNotFound) {
			t.Fatalf("StatBlob after delete: %v, want ErrNotFound", err)
		}
	}
}

// StatGeneration changes with every commit and delete, and not with
// lookups, so that what was made from StatBlob's answers can be kept
// until it does.
func TestStatGenerationFollowsCommitAndDelete(t *testing.T) {
	s := openTest(t, "")
	data := randomBytes(testChunk, 11)
	sha := shaOf(data)
	gen := s.StatGeneration()
	for range 2 {
		s.StatBlob(sha)
	}
	if g := s.StatGeneration(); g != gen {
		t.Fatalf("StatGeneration went from %d to %d with lookups only", gen, g)
	}
	put(t, s, data)
	if g := s.StatGeneration(); g == gen {
		t.Fatal("StatGeneration unchanged by a commit")
	}
	gen = s.StatGeneration()
	if err := s.DeleteBlob(sha); err != nil {
		t.Fatal(err)
	}
	if g := s.StatGeneration(); g == gen {
		t.Fatal("StatGeneration unchanged by a delete")
	}
}

// Lookups racing with a commit never leave a stale "not found" behind.
func TestStatBlobRacingCommit(t *testing.T) {
	s := openTest(t, "")
	for round := range 20 {
		data := randomBytes(testChunk, uint64(100+round))
		sha := shaOf(data)
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
						s.StatBlob(sha)
					}
				}
			}()
		}
		put(t, s, data)
		close(stop)
		wg.Wait()
		if _, err := s.StatBlob(sha); err != nil {
			t.Fatalf("round %d: StatBlob after a commit raced with lookups: %v", round, err)
		}
	}
}

func BenchmarkStatBlob(b *testing.B) {
	s, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	data := randomBytes(1<<20, 2)
	w, _ := s.NewBlobWriter(shaOf(data))
	w.Write(data)
	if _, err := w.Commit("h1:x"); err != nil {
		b.Fatal(err)
	}
	w.Close()
	present, absent := shaOf(data), shaOf([]byte("absent"))
	for b.Loop() {
		if _, err := s.StatBlob(present); err != nil {
			b.Fatal(err)
		}
		if _, err := s.StatBlob(absent); !errors.Is(err, ErrNotFound) {
			b.Fatal(err)
		}
	}
}
