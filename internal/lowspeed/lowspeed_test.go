package lowspeed_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/lowspeed"
)

// A transfer that keeps up with the limit is never aborted; one that
// falls below it is, once, at the end of the window it fell short in.
func TestCheck(t *testing.T) {
	// A window of a second: a transfer's pace is judged by the timer, so
	// a loaded machine's scheduling stalls must be short beside it. The
	// transfer reads four times a window, twice the limit: a window's end
	// falling on either side of a read, or a read late by half a window,
	// leaves the window with enough (at two reads a window, one read on
	// the wrong side of the timer left a window with 600 of 1,000 bytes).
	const window = time.Second
	var aborted atomic.Int32
	c := lowspeed.Start(1000, window, func() { aborted.Add(1) }) // 1,000 bytes a window
	for range 10 {
		c.Add(500)
		time.Sleep(window / 4)
	}
	if n := aborted.Load(); n != 0 {
		t.Fatalf("a transfer at 2,000 bytes/s under a 1,000 bytes/s limit was aborted %d times", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for aborted.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := aborted.Load(); n != 1 {
		t.Fatalf("a transfer that stopped was aborted %d times within 5s, want once", n)
	}
	time.Sleep(3 * window)
	if n := aborted.Load(); n != 1 {
		t.Errorf("aborted %d times, want once", n)
	}
	c.Stop()
}

// Stop ends the limit: no abort comes after it, and a nil Check (the
// limit off) takes Add and Stop.
func TestStopAndOff(t *testing.T) {
	var aborted atomic.Int32
	c := lowspeed.Start(1<<20, 20*time.Millisecond, func() { aborted.Add(1) })
	c.Stop()
	time.Sleep(100 * time.Millisecond)
	if n := aborted.Load(); n != 0 {
		t.Errorf("aborted %d times after Stop", n)
	}
	for _, off := range []*lowspeed.Check{lowspeed.Start(0, time.Second, nil), lowspeed.Start(1, 0, nil)} {
		if off != nil {
			t.Fatal("a limit of 0 bytes/s or a window of 0 is not off")
		}
		off.Add(1)
		off.Stop()
	}
	if got := lowspeed.MinBytes(1000, 30*time.Second); got != 30000 {
		t.Errorf("MinBytes(1000/s, 30s) = %d", got)
	}
	if got := lowspeed.MinBytes(1, time.Millisecond); got != 1 {
		t.Errorf("MinBytes(1/s, 1ms) = %d, want at least 1", got)
	}
}

// A paused check does not judge: its owner away from the body for many
// windows is not a slow sender. Resumed, the window goes on and one with
// too few bytes is aborted as before.
func TestPause(t *testing.T) {
	const window = 100 * time.Millisecond
	var aborted atomic.Int32
	c := lowspeed.Start(1000, window, func() { aborted.Add(1) })
	defer c.Stop()
	c.Pause()
	c.Pause() // twice is once
	time.Sleep(5 * window)
	if n := aborted.Load(); n != 0 {
		t.Fatalf("a check paused for 5 windows aborted %d times", n)
	}
	c.Resume()
	deadline := time.Now().Add(5 * time.Second)
	for aborted.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := aborted.Load(); n != 1 {
		t.Fatalf("a resumed check with no bytes aborted %d times within 5s, want once", n)
	}
	var off *lowspeed.Check
	off.Pause()
	off.Resume()
}
