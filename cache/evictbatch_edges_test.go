package cache

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
)

// A pass over archives of which only some may be evicted evicts those, in
// one batch, tells each once, and says once that what is left may not be
// evicted, not again at the next pass that finds the same.
func TestEvictionBatchThenWhatIsLeftIsKept(t *testing.T) {
	const size = testChunk * 2
	var logged logbuf.Buffer
	var mu sync.Mutex
	var evicted []string
	may := map[string]bool{}
	var mayMu sync.Mutex
	s := openEvicting(t, Options{MaxBytes: 4 * size, Evictable: func(string) bool { return false }}, &logged, &mu, &evicted)
	for i := range 20 {
		d := randomBytes(size, uint64(3000+i))
		if i%7 == 3 {
			mayMu.Lock()
			may[shaOf(d)] = true
			mayMu.Unlock()
		}
		put(t, s, d)
	}
	s.settle()
	before := len(logged.String())
	s.SetEvictable(func(sha string) bool {
		mayMu.Lock()
		defer mayMu.Unlock()
		return may[sha]
	})
	for range 3 {
		if err := s.EvictNow(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	if len(evicted) != 3 {
		t.Errorf("evicted %d archives, want the 3 that may be", len(evicted))
	}
	for _, sha := range evicted {
		if !may[sha] {
			t.Errorf("evicted %s, which is kept", sha[:8])
		}
	}
	mu.Unlock()
	if n := strings.Count(logged.String()[before:], "may not be evicted now"); n != 1 {
		t.Errorf("said %d times that what is left may not be evicted, want once:\n%s", n, logged.String())
	}
	if strings.Contains(logged.String(), "evicting archive") {
		t.Errorf("a deletion failed:\n%s", logged.String())
	}
}

// A batch whose picks reach an archive whose record cannot be read (an
// entry that outlived it) ends there: the archives before it are evicted
// and told, it is not, and the pass goes on to what covers the rest.
func TestEvictionBatchWithAnArchiveWithoutRecord(t *testing.T) {
	const size = testChunk * 2
	var logged logbuf.Buffer
	var mu sync.Mutex
	var evicted []string
	s := openEvicting(t, Options{MaxBytes: 2 * size, Evictable: func(string) bool { return false }}, &logged, &mu, &evicted)
	var ds [][]byte
	for i := range 6 {
		d := randomBytes(size, uint64(4000+i))
		put(t, s, d)
		ds = append(ds, d)
	}
	// An entry without a record, used between the second and third.
	s.evict.lru.mu.Lock()
	mid := (s.evict.lru.entries[shaOf(ds[1])].last + s.evict.lru.entries[shaOf(ds[2])].last) / 2
	s.evict.lru.mu.Unlock()
	ghost := shaOf(randomBytes(size, 4999))
	s.evict.lru.add(ghost, time.Unix(0, mid))
	s.SetEvictable(func(string) bool { return true })
	if err := s.EvictNow(t.Context()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(evicted) != 4 {
		t.Errorf("evicted %d archives, want 4", len(evicted))
	}
	for i, sha := range evicted {
		if sha == ghost {
			t.Error("told of an archive that was never there")
		}
		if sha != shaOf(ds[i]) {
			t.Errorf("evicted #%d is not the least recently used", i)
		}
	}
	if a, total := s.Stats(); a != 2 || total != 2*size {
		t.Errorf("Stats = %d, %d after the pass", a, total)
	}
	if strings.Contains(logged.String(), "evicting archive") {
		t.Errorf("a deletion failed:\n%s", logged.String())
	}
}

// openEvicting opens an in-memory store of opts (its chunks testChunk
// bytes) whose log goes to logged and whose evictions are told to
// evicted, under mu, once its count is done; closed when the test ends.
func openEvicting(t *testing.T, opts Options, logged *logbuf.Buffer, mu *sync.Mutex, evicted *[]string) *Store {
	t.Helper()
	opts.InMemory, opts.ChunkSize = true, testChunk
	opts.Logger = slog.New(slog.NewTextHandler(logged, nil))
	opts.OnEvict = recordEvictions(mu, evicted)
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.waitCount()
	t.Cleanup(func() { s.Close() })
	return s
}
