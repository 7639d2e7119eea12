// Package logbound owns one small thing: what strangers can make the
// mirror log, kept within a bound so that it cannot fill the log:
// warnings they can cause as many of as they like (a refusal of a
// made-up name, a wrong token), and a string of theirs quoted in a
// message (Cut).
//
// A Warnings logs at warn (or the level its caller gives) a burst at
// once and then at a steady rate; the warnings beyond the bound are
// logged at debug, and the next warning says how many were. It counts
// nothing else: what a caller must count for every event (a metric, the
// status page) it counts itself.
package logbound

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Warnings is the bound of one kind of warning. Safe for concurrent use.
type Warnings struct {
	mu       sync.Mutex
	limit    *rate.Limiter
	unlogged int    // logged at debug since the last warning
	countKey string // the attribute naming their number, "" for none
}

// New returns a bound of burst warnings at once, then every a second;
// countKey names the attribute of a warning that says how many were
// logged at debug since the last one ("" to say nothing).
func New(every rate.Limit, burst int, countKey string) *Warnings {
	return &Warnings{limit: rate.NewLimiter(every, burst), countKey: countKey}
}

// Log logs msg with its attributes args at now: at warn within the
// bound, else at debug.
func (w *Warnings) Log(log *slog.Logger, now time.Time, msg string, args ...any) {
	w.LogAt(log, now, slog.LevelWarn, msg, args...)
}

// LogAt is Log of a line whose level within the bound is level (info for
// a client's own mistakes, say), not warn.
func (w *Warnings) LogAt(log *slog.Logger, now time.Time, level slog.Level, msg string, args ...any) {
	w.mu.Lock()
	warn, unlogged := w.limit.AllowN(now, 1), w.unlogged
	if warn {
		w.unlogged = 0
	} else {
		w.unlogged++
	}
	w.mu.Unlock()
	if !warn {
		log.Debug(msg, args...)
		return
	}
	if unlogged > 0 && w.countKey != "" {
		args = append(args, w.countKey, unlogged)
	}
	log.Log(context.Background(), level, msg, args...)
}

// Cut is s cut to its first max bytes (no rune split), with how many
// bytes more it had: what a message keeps of a string a stranger gave
// (a file name of an evidence file, a line an import reports), which
// only the bound of the document it came in bounds. s itself when it
// has max bytes or fewer.
func Cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + fmt.Sprintf("... (%d bytes more)", len(s)-max)
}
