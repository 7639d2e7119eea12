package cache

import (
	"sync"
	"sync/atomic"
	"testing"
)

// UnlessInUse deletes nothing, and refuses no reader: an archive it
// looks at stays open to every reader while it does, whether it then
// finds another in use (and fn does not run) or not. A reader refused
// then would take a cached archive for one not cached: a sealed mirror
// would fail the client, another fetch it from the origin again.
func TestUnlessInUseRefusesNoReader(t *testing.T) {
	s := openLimited(t, "", 0, new([]string))
	free := randomBytes(testChunk+5, 951)
	held := randomBytes(testChunk+6, 952)
	put(t, s, free)
	put(t, s, held)
	b, err := s.OpenBlob(shaOf(held)) // a client reads it: in use
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	shas := []string{shaOf(free), shaOf(held)}

	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			s.UnlessInUse(shas, func() error { return nil })
		}
	}()
	var refused int
	for range 20000 {
		r, err := s.OpenBlob(shaOf(free))
		if err != nil {
			refused++
			continue
		}
		r.Close()
	}
	stop.Store(true)
	wg.Wait()
	if refused > 0 {
		t.Errorf("%d of 20000 opens of a cached archive refused while UnlessInUse looked at it", refused)
	}
}
