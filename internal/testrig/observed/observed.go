// Package observed keeps what a component under test reports, for the
// tests that check how it reports it: the log records it writes (Logs,
// a slog.Handler) and the requests it observes, with their status codes
// (Requests, a proxy.Instrument observer). Both are safe for concurrent use.
// AskGone asks a handler as a client that went away before its answer.
package observed

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// Logs is a slog.Handler that keeps every record, at every level.
type Logs struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *Logs) Enabled(context.Context, slog.Level) bool { return true }

func (h *Logs) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r)
	return nil
}

func (h *Logs) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *Logs) WithGroup(string) slog.Handler      { return h }

// Records returns the records kept so far.
func (h *Logs) Records() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.records)
}

// LevelOf returns the level of the first record with message msg; false
// when there is none.
func (h *Logs) LevelOf(msg string) (slog.Level, bool) {
	for _, r := range h.Records() {
		if r.Message == msg {
			return r.Level, true
		}
	}
	return 0, false
}

// Max returns the highest level of the records kept, or one below
// slog.LevelDebug when there is none.
func (h *Logs) Max() slog.Level {
	top := slog.LevelDebug - 1
	for _, r := range h.Records() {
		top = max(top, r.Level)
	}
	return top
}

// Request is what a proxy.Instrument observer is told of one request.
type Request struct {
	Route    string
	Code     int
	Duration time.Duration
	Bytes    int64 // of the body counted as sent
	Aborted  bool  // broken off after its status went out
}

// Requests keeps the requests it observes, in order.
type Requests struct {
	mu   sync.Mutex
	seen []Request
}

func (o *Requests) ObserveRequest(route string, code int, d time.Duration, bytes int64, aborted bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, Request{Route: route, Code: code, Duration: d, Bytes: bytes, Aborted: aborted})
}

// Seen returns the requests observed so far.
func (o *Requests) Seen() []Request {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.seen)
}

// Codes returns the status codes of the requests observed so far.
func (o *Requests) Codes() []int {
	var codes []int
	for _, r := range o.Seen() {
		codes = append(codes, r.Code)
	}
	return codes
}

// AtLeast returns the records kept at level or above, in order.
func (h *Logs) AtLeast(level slog.Level) []slog.Record {
	var out []slog.Record
	for _, r := range h.Records() {
		if r.Level >= level {
			out = append(out, r)
		}
	}
	return out
}

// AskGone asks h for each path with GET, as a client that went away
// before it was answered, and returns the status codes h wrote, in the
// order of paths.
func AskGone(h http.Handler, paths []string) []int {
	codes := make([]int, 0, len(paths))
	for _, path := range paths {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // the client has gone away
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil))
		codes = append(codes, rec.Code)
	}
	return codes
}

// Expect fails t for every request of paths not observed with code
// want, and when the codes observed are not one for each path.
func (o *Requests) Expect(t testing.TB, paths []string, want int) {
	t.Helper()
	codes := o.Codes()
	if len(codes) != len(paths) {
		t.Fatalf("observed %v for %d requests", codes, len(paths))
	}
	for i, code := range codes {
		if code != want {
			t.Errorf("%s: counted as %d, want %d", paths[i], code, want)
		}
	}
}

// AskClientFaults asks h n times with GET, for paths in turn, and fails t
// unless each is answered a client error (4xx): a stranger's requests in
// a loop.
func AskClientFaults(t testing.TB, h http.Handler, paths []string, n int) {
	t.Helper()
	for i := range n {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, paths[i%len(paths)], nil))
		if rec.Code < 400 || rec.Code >= 500 {
			t.Fatalf("%s: status %d, want a client error", paths[i%len(paths)], rec.Code)
		}
	}
}

// Besides counts the records kept at level or above whose message is not
// msg (the lines besides the access log's, say).
func (h *Logs) Besides(msg string, level slog.Level) int {
	n := 0
	for _, r := range h.AtLeast(level) {
		if r.Message != msg {
			n++
		}
	}
	return n
}
