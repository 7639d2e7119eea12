// Package logbound owns one small thing: what strangers can make the
// mirror log, kept within a bound so that it cannot fill the log:
// warnings they can cause as many of as they like (a refusal of a
// made-up name, a wrong token), a string of theirs quoted in a message
// (Cut), and the characters of one that a terminal showing it would obey
// (Escaped).
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
	"unicode"

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

// MaxErrorText is the most bytes of an error's text that a stranger's
// answer fills (an origin's document, a Git server's ERR line): what is
// past it is cut (CutError), so that one answer cannot make a log line, a
// client's 502 or the status page's row of a megabyte.
const MaxErrorText = 4 << 10

// CutError is err, not nil, with its text cut to at most max bytes, Cut's
// note of how many more it had included; errors.Is and errors.As see err.
// err itself when its text fits. Cut it once any credential is replaced
// in the text, never before, so that no cut leaves part of a credential
// that the replacement would not find.
func CutError(err error, max int) error {
	msg := err.Error()
	if len(msg) <= max {
		return err
	}
	// Cut's "... (N bytes more)" takes at most 40 bytes.
	return &cutError{err: err, msg: Cut(msg, max-40)}
}

// cutError is an error whose text CutError cut.
type cutError struct {
	err error
	msg string
}

func (e *cutError) Error() string { return e.msg }
func (e *cutError) Unwrap() error { return e.err }

// Escaped is s with its control characters (C0, DEL, C1) and format
// characters (Cf: a bidirectional override or isolate, a zero-width
// character) written as escapes, \xHH below U+0100, else \uHHHH or
// \UHHHHHHHH: a terminal showing s obeys none of them (an escape
// sequence or a C1 control written as UTF-8 sets its title or clears
// it; a bidirectional override shows the text after it reversed). JSON
// escapes the C0 ones only. s itself when it has none.
func Escaped(s string) string {
	if !strings.ContainsFunc(s, escaped) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case !escaped(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r) // a language tag, U+E0001
		}
	}
	return b.String()
}

// EscapedLines is s Escaped line by line: its line breaks kept (a
// message that names a thing a line), every other control character
// and format character written as an escape.
func EscapedLines(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r != '\n' && escaped(r) }) {
		return s
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = Escaped(l)
	}
	return strings.Join(lines, "\n")
}

// escaped reports whether Escaped writes r as an escape.
func escaped(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }
