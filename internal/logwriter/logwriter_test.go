package logwriter

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// sink records what reaches the underlying writer, one entry per Write.
type sink struct {
	mu     sync.Mutex
	writes [][]byte
	gate   chan struct{} // when not nil, each Write waits until it is closed
	err    error
}

func (s *sink) Write(p []byte) (int, error) {
	if s.gate != nil {
		<-s.gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes = append(s.writes, bytes.Clone(p))
	return len(p), s.err
}

func (s *sink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(bytes.Join(s.writes, nil))
}

func (s *sink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.writes)
}

// Every line of every writer arrives whole, once, and in each writer's
// order; many lines share a write.
func TestConcurrentLinesArriveWholeAndInOrder(t *testing.T) {
	s := &sink{}
	w := New(s, 4096)
	const writers, lines = 16, 500
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range lines {
				line := fmt.Sprintf("writer=%d line=%d %s\n", g, i, strings.Repeat("x", i%50))
				if n, err := w.Write([]byte(line)); n != len(line) || err != nil {
					t.Errorf("Write = %d, %v", n, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	next := make([]int, writers)
	got := strings.Split(strings.TrimSuffix(s.String(), "\n"), "\n")
	if len(got) != writers*lines {
		t.Fatalf("%d lines arrived, want %d", len(got), writers*lines)
	}
	for _, l := range got {
		var g, i int
		var pad string
		if n, _ := fmt.Sscanf(l, "writer=%d line=%d %s", &g, &i, &pad); n < 2 || g < 0 || g >= writers {
			t.Fatalf("mangled line %q", l)
		}
		if i != next[g] || len(pad) != i%50 {
			t.Fatalf("writer %d: got line %q, want line %d", g, l, next[g])
		}
		next[g]++
	}
	if n := s.count(); n >= writers*lines {
		t.Errorf("%d underlying writes for %d lines: no batching", n, writers*lines)
	}
}

// A line written to an idle writer reaches the underlying writer soon,
// without Close.
func TestIdleLineIsWrittenPromptly(t *testing.T) {
	s := &sink{}
	w := New(s, 0)
	defer w.Close()
	w.Write([]byte("hello\n"))
	deadline := time.Now().Add(time.Minute) // "soon": milliseconds unless the machine is loaded
	for s.String() != "hello\n" {
		if time.Now().After(deadline) {
			t.Fatalf("line not written within a minute (got %q)", s.String())
		}
		time.Sleep(time.Millisecond)
	}
}

// When the underlying writer stalls, the buffer stops at its limit and
// writers wait; nothing is dropped, and they go on when it moves again.
func TestFullBufferMakesWritersWait(t *testing.T) {
	s := &sink{gate: make(chan struct{})}
	const limit = 100
	w := New(s, limit)
	line := []byte(strings.Repeat("a", 39) + "\n") // 40 bytes
	// The first batch is taken and stalls in the sink; then the buffer
	// fills to its limit.
	w.Write(line)
	waitFor(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.pending) == 0
	})
	w.Write(line)
	w.Write(line) // 80 bytes pending: one more would pass the limit
	returned := make(chan struct{})
	go func() {
		w.Write(line)
		close(returned)
	}()
	select {
	case <-returned:
		t.Fatal("Write returned with the buffer full and the sink stalled")
	case <-time.After(100 * time.Millisecond):
	}
	w.mu.Lock()
	pending := len(w.pending)
	w.mu.Unlock()
	if pending > limit {
		t.Fatalf("%d bytes buffered, limit %d", pending, limit)
	}
	close(s.gate) // the sink moves again
	<-returned
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := s.String(), strings.Repeat(string(line), 4); got != want {
		t.Fatalf("sink got %d bytes, want %d", len(got), len(want))
	}
}

// Close writes what is buffered and reports the underlying writer's
// error; writes after Close go straight through, in order.
func TestCloseFlushesAndReportsError(t *testing.T) {
	boom := errors.New("disk gone")
	s := &sink{err: boom}
	w := New(s, 0)
	w.Write([]byte("one\n"))
	w.Write([]byte("two\n"))
	if err := w.Close(); !errors.Is(err, boom) {
		t.Fatalf("Close = %v, want %v", err, boom)
	}
	if err := w.Close(); !errors.Is(err, boom) {
		t.Fatalf("second Close = %v, want %v", err, boom)
	}
	n := s.count()
	if _, err := w.Write([]byte("three\n")); !errors.Is(err, boom) {
		t.Fatalf("Write after Close = %v, want the sink's error", err)
	}
	if s.count() != n+1 {
		t.Fatal("Write after Close did not reach the sink at once")
	}
	if got := s.String(); got != "one\ntwo\nthree\n" {
		t.Fatalf("sink got %q", got)
	}
}

// Close while writers are still writing loses nothing either.
func TestCloseDuringWrites(t *testing.T) {
	s := &sink{}
	w := New(s, 256)
	var wg sync.WaitGroup
	writing := make(chan struct{})
	var once sync.Once
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				w.Write([]byte("line\n"))
				once.Do(func() { close(writing) })
			}
		}()
	}
	<-writing
	w.Close()
	wg.Wait()
	if got := strings.Count(s.String(), "line\n"); got != 800 {
		t.Fatalf("%d lines arrived, want 800", got)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // milliseconds unless the machine is loaded
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within a minute")
		}
		time.Sleep(time.Millisecond)
	}
}

// overlapDetector fails the test when two Writes overlap.
type overlapDetector struct {
	t       *testing.T
	writing atomic.Bool
	n       atomic.Int32
}

func (d *overlapDetector) Write(p []byte) (int, error) {
	if !d.writing.CompareAndSwap(false, true) {
		d.t.Errorf("two writes at once; the second: %q", p)
		return len(p), nil
	}
	defer d.writing.Store(false)
	time.Sleep(50 * time.Microsecond) // long enough for another to overlap
	d.n.Add(1)
	return len(p), nil
}

// Lines written through one Exclusive from many goroutines at once
// reach the writer one at a time, each whole.
func TestExclusiveWritesOneAtATime(t *testing.T) {
	d := &overlapDetector{t: t}
	e := NewExclusive(d)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				fmt.Fprintf(e, "goroutine %d line %d\n", g, i)
			}
		})
	}
	wg.Wait()
	if n := d.n.Load(); n != 160 {
		t.Fatalf("%d writes reached the writer, want 160", n)
	}
}
