package cache

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// withClock gives s a clock that tests move by hand.
func withClock(s *Store) (advance func(time.Duration)) {
	var mu sync.Mutex
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	s.db.space.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	return func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
}

// Readiness probes from many load balancer nodes at once all succeed, and
// cost the database at most one write per PingInterval: none at all while
// other writes show that it writes.
func TestPingConcurrentProbesWriteOnce(t *testing.T) {
	s := openTest(t, t.TempDir())
	advance := withClock(s)
	probe := func() {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, 64*50)
		for range 64 {
			wg.Go(func() {
				for range 50 {
					if err := s.Ping(); err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("Ping under concurrent probes: %v", err)
		}
	}
	probe()
	if n := s.db.writes.Load(); n != 1 {
		t.Fatalf("3200 concurrent probes wrote %d times, want 1", n)
	}
	advance(PingInterval / 2)
	probe()
	if n := s.db.writes.Load(); n != 1 {
		t.Fatalf("probes within PingInterval wrote %d times, want 1 in all", n)
	}
	advance(PingInterval)
	probe()
	if n := s.db.writes.Load(); n != 2 {
		t.Fatalf("after PingInterval with nothing written: %d writes, want 2 (one more probe)", n)
	}

	// A write that succeeded is evidence enough: no probe.
	advance(PingInterval)
	if err := s.PutMeta("versions/x", 1); err != nil {
		t.Fatal(err)
	}
	before := s.db.writes.Load()
	probe()
	if n := s.db.writes.Load(); n != before {
		t.Errorf("probes after a successful write wrote %d times, want 0", n-before)
	}
}

// A failed probe is remembered for the interval too (one write a
// PingInterval however many probes), and the next probe after it tells
// the cache writes again.
func TestPingFailureMemoized(t *testing.T) {
	s := openTest(t, "")
	advance := withClock(s)
	fail := errors.New("disk on fire")
	s.hooks.pingWrite = func() error { return fail }
	for range 10 {
		if err := s.Ping(); !errors.Is(err, fail) {
			t.Fatalf("Ping = %v, want the write's failure", err)
		}
	}
	if n := s.db.writes.Load(); n != 0 { // the hook fails before Badger is written
		t.Errorf("%d writes", n)
	}
	s.hooks.pingWrite = nil
	advance(PingInterval)
	if err := s.Ping(); err != nil {
		t.Errorf("Ping after the fault cleared: %v", err)
	}
}
