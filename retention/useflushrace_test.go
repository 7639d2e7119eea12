package retention

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/mirror"
)

// slowUseWrites is a cache whose writes of last uses wait, once armed,
// until released: a batch of last uses being written as a prune runs.
type slowUseWrites struct {
	Store
	mu      sync.Mutex
	armed   bool
	writing chan struct{} // closed once an armed write began
	release chan struct{}
}

func (s *slowUseWrites) PutMeta(key string, v any) error {
	s.mu.Lock()
	armed := s.armed && strings.HasPrefix(key, lastUsePrefix)
	if armed {
		s.armed = false
		close(s.writing)
	}
	s.mu.Unlock()
	if armed {
		<-s.release
	}
	return s.Store.PutMeta(key, v)
}

// A download's last use, taken into the batch being written as a prune
// by the unused rule reads the last uses, counts: the version downloaded
// a moment ago is kept, though the batch has not reached the cache yet.
func TestRetentionUnusedCountsTheBatchBeingWritten(t *testing.T) {
	t.Parallel()
	clock := enginetest.NewFakeClock()
	slow := &slowUseWrites{writing: make(chan struct{}), release: make(chan struct{})}
	h := newHarness(t, harnessOptions{cfg: mirror.Config{Now: clock.Now},
		ret:       Config{UnusedAfter: 7 * 24 * time.Hour, Interval: -1},
		wrapStore: func(s Store) Store { slow.Store = s; return slow }})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
	h.readAll("1.0.0") // day 0
	h.ret.flush()
	clock.Add(8 * 24 * time.Hour)
	h.readAll("1.0.0") // day 8: a download a moment ago

	slow.mu.Lock()
	slow.armed = true
	slow.mu.Unlock()
	flushed := make(chan struct{})
	go func() { defer close(flushed); h.ret.flush() }()
	<-slow.writing
	done, err := h.ret.Prune(t.Context(), PruneRequest{})
	close(slow.release)
	<-flushed
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 0 || !h.isCached("1.0.0") {
		t.Errorf("a version downloaded a moment ago, its use in the batch being written, was removed as unused: %v", removalNames(done))
	}
}
