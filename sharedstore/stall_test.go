package sharedstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/sharedstore"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// An archive's body that goes silent midway (a store, or the network to
// it, that stops answering) fails once no byte came for the call's
// timeout, as a failure of the store: not a verification failure, so
// that the fetch takes the rest from the origin (mirror/fetch), and
// counted toward the circuit breaker. Before, the read waited for the
// caller's context alone, an archive download's hour, and every client
// of that archive with it.
func TestArchiveBodyStallBounded(t *testing.T) {
	srv := startServer(t)
	u := srv.StallingURL(t, "tfm", "replicas/a")
	obs := &observer{}
	s, err := sharedstore.Open(context.Background(), sharedstore.Config{URL: u, Holder: "a", Keys: testKeys(t),
		CallTimeout: 300 * time.Millisecond, SlowCall: -1, BreakerThreshold: 1, BreakerCooldown: time.Minute, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	checkBodyBrokenOff(t, s, "no data", "a body that went silent, the call's timeout being 300ms")
}

// An archive's body that keeps sending, a byte at a time, each sooner
// than the call timeout, fails under the low-speed limit (Config.MinSpeed
// over a call timeout) as a stalled one does. Before, only the wait for
// each byte was bounded: a store dripping a byte every few seconds held
// the download, and every client of it, for the archive timeout, an hour.
func TestArchiveBodyDripBounded(t *testing.T) {
	srv := startServer(t)
	u := srv.DrippingURL(t, "tfm", "replicas/a", 50*time.Millisecond)
	s, err := sharedstore.Open(context.Background(), sharedstore.Config{URL: u, Holder: "a", Keys: testKeys(t),
		CallTimeout: 500 * time.Millisecond, SlowCall: -1, MinSpeed: 1 << 10, BreakerThreshold: 1, BreakerCooldown: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	checkBodyBrokenOff(t, s, "low-speed limit", "a body dripping a byte every 50ms, the limit 1 KiB/s over 500ms")
}

// checkBodyBrokenOff stores an archive through s, whose store breaks off
// the second half of archive bodies (what), and reads it back: the read
// fails within 10s with an error saying why (want), as a failure of the
// store (not a verification failure, which no origin mends), counted
// toward the breaker (threshold 1: open after it).
func checkBodyBrokenOff(t *testing.T, s *sharedstore.Store, want, what string) {
	t.Helper()
	data, body := storedArchive(t, s)
	defer body.Close()
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(body)
		done <- result{len(b), err}
	}()
	select {
	case r := <-done:
		if r.err == nil {
			t.Fatalf("%s: read %d of %d bytes without error", what, r.n, len(data))
		}
		if errors.As(r.err, new(*verify.Error)) {
			t.Errorf("%s: failed as a verification failure (which no origin mends): %v", what, r.err)
		}
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("%s: the error does not say %q: %v", what, want, r.err)
		}
	case <-time.After(10 * time.Second):
		body.Close()
		<-done
		t.Fatalf("%s: still read 10s on", what)
	}
	if !errors.Is(s.Status(), sharedstore.ErrUnavailable) {
		t.Errorf("the store after %s, breaker threshold 1: %v, want unavailable", what, s.Status())
	}
}

// storedArchive stores an archive of 1.7 MB through s and opens it
// again: its bytes, and its body, which the caller closes.
func storedArchive(t *testing.T, s *sharedstore.Store) ([]byte, io.ReadCloser) {
	t.Helper()
	data := bytes.Repeat([]byte("provider archive "), 100000)
	sha := shaOf(data)
	if err := s.PutArchive(context.Background(), sha, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	body, _, err := s.OpenArchive(context.Background(), sha)
	if err != nil || body == nil {
		t.Fatalf("open: %v, %v", body != nil, err)
	}
	return data, body
}

// A store that answers every call, but only after more than half the
// call timeout (Config.SlowCall's default), opens the breaker as a failing
// one does, its answers used all the same: each request reading through
// it would otherwise wait that long for every record, for as long as the
// store stays so slow. A store answering within the bound leaves the
// breaker closed. Before, only failed calls counted: the breaker never
// opened for a store answering just within the timeout.
func TestSlowAnswersOpenTheBreaker(t *testing.T) {
	srv := startServer(t)
	for _, tc := range []struct {
		name  string
		delay time.Duration
		open  bool
	}{
		{"answers in 1.2s, the call timeout 2s", 1200 * time.Millisecond, true},
		{"answers at once", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := &observer{}
			s, err := sharedstore.Open(context.Background(), sharedstore.Config{
				URL: srv.SlowAnswersURL(t, "tfm", "replicas/slow", tc.delay), Holder: "a", Keys: testKeys(t),
				CallTimeout: 2 * time.Second, BreakerThreshold: 2, BreakerCooldown: time.Minute, Observer: obs})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := s.PutMeta(ctx, "k", "v"); err != nil {
				t.Fatalf("a slow answer is an answer: %v", err)
			}
			raw, _, err := s.GetMeta(ctx, "k")
			if err != nil || string(raw) != `"v"` {
				t.Fatalf("a slow answer is used: %s, %v", raw, err)
			}
			if got := errors.Is(s.Status(), sharedstore.ErrUnavailable); got != tc.open {
				t.Fatalf("breaker open %v after two answers, want %v: %v", got, tc.open, s.Status())
			}
			if got := obs.down.Load(); got != tc.open {
				t.Errorf("tfmirror_shared_store_down %v, want %v", got, tc.open)
			}
			if tc.open && !strings.Contains(s.Status().Error(), "slower than 1s") {
				t.Errorf("the breaker's reason does not say the store is slow: %v", s.Status())
			}
		})
	}
}

// The low-speed limit counts only the time the reader waits for the
// store's bytes: a reader that holds the body between reads (its copy
// into the local cache blocked on a slow or full disk) for several call
// timeouts reads the rest of it as it comes, and the store is not blamed.
// Before, the limit's windows ran on while the reader was away, and the
// body failed as a stalled store, opening the breaker (every replica's
// readers then saw the store down) while the store was fine.
func TestArchiveBodyReaderHeldNotBlamed(t *testing.T) {
	srv := startServer(t)
	const callTimeout = 500 * time.Millisecond
	obs := &observer{}
	s, err := sharedstore.Open(context.Background(), sharedstore.Config{URL: srv.URL("tfm", "replicas/a"), Holder: "a", Keys: testKeys(t),
		CallTimeout: callTimeout, SlowCall: -1, MinSpeed: 16 << 10, BreakerThreshold: 1, BreakerCooldown: time.Minute, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	data, body := storedArchive(t, s)
	defer body.Close()
	first := make([]byte, 1<<10)
	if _, err := io.ReadFull(body, first); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * callTimeout) // the reader's local write, blocked for four windows of the limit
	rest, err := io.ReadAll(body)
	if err != nil {
		t.Fatalf("a body whose reader was away for 4 call timeouts: %v", err)
	}
	if !bytes.Equal(append(first, rest...), data) {
		t.Fatalf("read %d bytes, not the %d stored", len(first)+len(rest), len(data))
	}
	if err := s.Status(); err != nil {
		t.Errorf("the store after a reader held its body: %v, want available", err)
	}
	if obs.down.Load() {
		t.Error("tfmirror_shared_store_down set by a reader that held its body")
	}
}
