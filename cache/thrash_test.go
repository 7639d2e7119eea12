package cache

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"
)

// Many writers and readers of many archives under a size limit that holds
// two of them: every read of an archive that was opened gives the whole
// archive, whatever the eviction deletes meanwhile, and once the store is
// closed no goroutine of its (eviction, free-space watch, Badger's) is
// left.
func TestThrashUnderATinyLimit(t *testing.T) {
	before := runtime.NumGoroutine()
	const size = testChunk * 3
	s, err := Open(Options{Dir: t.TempDir(), ChunkSize: testChunk, MaxBytes: 2 * size})
	if err != nil {
		t.Fatal(err)
	}
	s.waitCount()
	archives := make([][]byte, 12)
	for i := range archives {
		archives[i] = randomBytes(size, uint64(i+1))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				data := archives[(g*7+i)%len(archives)]
				sha := shaOf(data)
				if r, err := s.OpenBlob(sha); err == nil {
					got, err := io.ReadAll(r)
					r.Close()
					if err != nil || !bytes.Equal(got, data) {
						errs <- errors.Join(errors.New("a read of an opened archive was not the archive"), err)
					}
					continue
				} else if !errors.Is(err, ErrNotFound) {
					errs <- err
					continue
				}
				w, err := s.NewBlobWriter(sha)
				if err != nil {
					errs <- err
					continue
				}
				w.Write(data)
				if _, err := w.Commit("h1:x"); err != nil {
					errs <- err
				}
				// Read back through the writer (as clients of a download do)
				// after the commit, while eviction runs.
				got := make([]byte, len(data))
				if _, err := followAt(w, got, 0); err != nil || !bytes.Equal(got, data) {
					errs <- errors.Join(errors.New("a read through the committed writer was not the archive"), err)
				}
				w.Close()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	s.settle()
	if _, total := s.Stats(); total > 2*size {
		t.Errorf("%d bytes cached after the writers closed, over the %d limit", total, 2*size)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute) // goroutines ending: milliseconds unless the machine is loaded
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after Close, %d before Open:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}
