// Package flights counts work that runs apart from its callers (a
// detached origin fetch, a shared service discovery), so that the owner
// that ends it can wait for it: after Close, no new work starts, and
// Close returns once what was under way has called Done. A
// sync.WaitGroup alone may not be waited on while it can still be
// incremented from zero; this adds the refusal that makes it so.
package flights

import "sync"

// Flights is the work under way; the zero value is ready to use.
type Flights struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// Start counts one more piece of work, which must call Done when it
// ends; false once Close was called, and nothing is counted.
func (f *Flights) Start() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.wg.Add(1)
	return true
}

// Done ends a piece of work Start counted.
func (f *Flights) Done() { f.wg.Done() }

// Close refuses work from now on and waits for the work under way.
func (f *Flights) Close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.wg.Wait()
}
