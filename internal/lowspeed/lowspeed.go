// Package lowspeed is a transfer's low-speed limit: a body that receives
// fewer than a given number of bytes per second, on average over a
// window, is aborted.
//
// The contract: Start begins the first window; the owner of the transfer
// counts each read with Add and calls Stop once the transfer is over
// (however it ended); at the end of a window with too few bytes the
// Check calls its abort function once, from its own timer's goroutine,
// and checks no more. The owner may Pause the check while it is away
// from the body (the time it spends writing what it read is not the
// sender's) and Resume it before the next read: the windows count only
// the time between. A nil *Check (the limit off) takes every method.
package lowspeed

import (
	"sync"
	"sync/atomic"
	"time"
)

// Check is the low-speed limit of one transfer.
type Check struct {
	minBytes int64 // per window
	window   time.Duration
	abort    func()
	received atomic.Int64

	mu      sync.Mutex
	last    int64 // received at the start of the current window
	timer   *time.Timer
	end     time.Time     // of the current window, while it runs
	left    time.Duration // of the current window, while paused
	paused  bool
	stopped bool
}

// MinBytes is the fewest bytes a window of the limit must receive:
// bytesPerSecond over window, at least 1.
func MinBytes(bytesPerSecond int64, window time.Duration) int64 {
	return max(1, int64(float64(bytesPerSecond)*window.Seconds()))
}

// Start starts the limit of bytesPerSecond over window; abort is called
// once when a window receives fewer than MinBytes. It returns nil (the
// limit off) when either is not positive.
func Start(bytesPerSecond int64, window time.Duration, abort func()) *Check {
	if bytesPerSecond <= 0 || window <= 0 {
		return nil
	}
	c := &Check{minBytes: MinBytes(bytesPerSecond, window), window: window, abort: abort}
	c.mu.Lock()
	c.end = time.Now().Add(window)
	c.timer = time.AfterFunc(window, c.check)
	c.mu.Unlock()
	return c
}

// Add counts n bytes received.
func (c *Check) Add(n int) {
	if c != nil {
		c.received.Add(int64(n))
	}
}

// check runs at the end of a window.
func (c *Check) check() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped || c.paused || time.Now().Before(c.end) {
		return // a firing from before a Pause or a Resume
	}
	got := c.received.Load()
	if got-c.last < c.minBytes {
		c.stopped = true
		c.abort()
		return
	}
	c.last = got
	c.end = time.Now().Add(c.window)
	c.timer.Reset(c.window)
}

// Pause stops the current window's clock until Resume.
func (c *Check) Pause() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped || c.paused {
		return
	}
	c.paused = true
	c.timer.Stop()
	c.left = max(0, time.Until(c.end))
}

// Resume starts the current window's clock again where Pause stopped it.
func (c *Check) Resume() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped || !c.paused {
		return
	}
	c.paused = false
	c.end = time.Now().Add(c.left)
	c.timer.Reset(c.left)
}

// Stop ends the limit; abort is not called after it returns.
func (c *Check) Stop() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	c.timer.Stop()
}
