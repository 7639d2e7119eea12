// Package observed keeps what a component under test reports, for the
// tests that check how it reports it: the log records it writes (Logs,
// a slog.Handler) and the status codes of the requests it observes
// (Codes, a proxy.Instrument observer). Both are safe for concurrent use.
package observed

import (
	"context"
	"log/slog"
	"slices"
	"sync"
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

// Codes keeps the status codes of the requests it observes, in order.
type Codes struct {
	mu    sync.Mutex
	codes []int
}

func (o *Codes) ObserveRequest(_ string, code int, _ time.Duration, _ int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.codes = append(o.codes, code)
}

// Codes returns the codes observed so far.
func (o *Codes) Codes() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.codes)
}
