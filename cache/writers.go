// The archive writers under way, which Shutdown waits for, and the memory
// they hold for chunks that could not be stored.

package cache

import "sync"

// writerGate registers the archive writers not yet closed, refuses new
// ones (and new metadata writes) once the store is closing, and keeps the
// budget of memory held, across all writers, for chunks that could not
// be written to Badger (Options.MaxUnstagedBytes).
type writerGate struct {
	mu      sync.Mutex
	active  map[string]bool // stage ids of writers not yet closed
	closing bool            // Shutdown or Close began: no new writers
	drained chan struct{}   // closed when active empties while closing

	// unstaged is the memory held by writers for chunks that could not
	// be stored, at most maxUnstaged (negative: none).
	unstaged    int64
	maxUnstaged int64
}

// register adds the writer of stage, or returns ErrClosed.
func (g *writerGate) register(stage string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing {
		return ErrClosed
	}
	g.active[stage] = true
	return nil
}

// done ends the writer of stage: it no longer holds Shutdown up.
func (g *writerGate) done(stage string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.active, stage)
	if len(g.active) == 0 && g.drained != nil {
		close(g.drained)
		g.drained = nil
	}
}

// refuse makes NewBlobWriter, PutMeta and DeleteMeta fail with ErrClosed
// from now on. It returns a channel closed when no writer is open any
// more (nil when none is open now).
func (g *writerGate) refuse() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closing = true
	if len(g.active) == 0 {
		return nil
	}
	if g.drained == nil {
		g.drained = make(chan struct{})
	}
	return g.drained
}

// refusing reports whether the store refuses new writes.
func (g *writerGate) refusing() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closing
}

// open is how many writers are not yet closed.
func (g *writerGate) open() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.active)
}

// notActive removes from stages those of writers under way.
func (g *writerGate) notActive(stages map[string]int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for stage := range g.active {
		delete(stages, stage)
	}
}

// reserveUnstaged takes n bytes of the unstaged-memory budget, if there
// are that many left.
func (g *writerGate) reserveUnstaged(n int64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.maxUnstaged < 0 || g.unstaged+n > g.maxUnstaged {
		return false
	}
	g.unstaged += n
	return true
}

// releaseUnstaged returns n bytes to the unstaged-memory budget.
func (g *writerGate) releaseUnstaged(n int64) {
	if n == 0 {
		return
	}
	g.mu.Lock()
	g.unstaged -= n
	g.mu.Unlock()
}
