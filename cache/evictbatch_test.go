package cache

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Archives that many writers committed while a pass was deleting are
// deleted together by the next round of the pass, not one after the other:
// each deletion waits for its writes (two a deletion, in Badger's write
// queue with the writers' chunks and commits), and a pass that waited for
// them one archive at a time let the writers, whose commits share those
// waits, take the cache far over its limit before it caught up.
func TestEvictionDeletesWhatIsOverTogether(t *testing.T) {
	const size = testChunk * 4
	s := openLimited(t, "", 2*size, new([]string))
	a, b, c := randomBytes(size, 1), randomBytes(size, 2), randomBytes(size, 3)
	put(t, s, a)
	put(t, s, b)

	// The first deletion is held, while more archives are committed: the
	// pass then finds them over the limit all at once.
	picked := make(chan string, 1)
	release := make(chan struct{})
	var first sync.Once
	// Each later deletion waits, as a deletion waits for a write, until the
	// others over the limit have been started too (or a while).
	const over = 4
	var inside, most atomic.Int32
	all := make(chan struct{})
	var allOnce sync.Once
	s.hooks.evicting = func(sha string) {
		held := false
		first.Do(func() {
			held = true
			picked <- sha
			<-release
		})
		if held {
			return
		}
		n := inside.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if n >= over {
			allOnce.Do(func() { close(all) })
		}
		select {
		case <-all:
		case <-time.After(500 * time.Millisecond):
		}
		inside.Add(-1)
	}
	put(t, s, c)
	select {
	case <-picked:
	case <-time.After(30 * time.Second):
		t.Fatal("no eviction after a commit over the limit")
	}
	var more [][]byte
	for i := range over {
		d := randomBytes(size, uint64(10+i))
		put(t, s, d)
		more = append(more, d)
	}
	close(release)
	if err := s.EvictNow(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, bytes := s.Stats(); bytes > 2*size {
		t.Fatalf("%d archives, %d bytes after the pass, over the limit of %d", n, bytes, 2*size)
	}
	if got := most.Load(); got < over {
		t.Errorf("the pass deleted at most %d of the %d archives over the limit at once, want all", got, over)
	}
	for _, d := range more[over-2:] {
		if !cached(s, d) {
			t.Errorf("a most recently committed archive was evicted")
		}
	}
}
