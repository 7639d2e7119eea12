// Package jsonlog is log/slog's JSON handler with a faster way through for
// the records a server writes on every request (the access log): records
// whose attributes are all strings, integers, booleans and durations are
// encoded here, byte for byte as slog.JSONHandler encodes them, without
// slog's general machinery; every other record, and every handler derived
// with WithAttrs or WithGroup, is slog.JSONHandler's.
package jsonlog

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// Handler writes JSON lines as slog.JSONHandler does. Create it with New.
type Handler struct {
	json *slog.JSONHandler // everything the fast path does not take
	w    *lockedWriter     // shared with json, so that lines never interleave
	fast bool              // options leave the output to the built-in keys and attributes
}

// New returns a Handler writing to w with opts (nil: the defaults), as
// slog.NewJSONHandler(w, opts) would.
func New(w io.Writer, opts *slog.HandlerOptions) *Handler {
	if opts == nil {
		opts = &slog.HandlerOptions{}
	}
	lw := &lockedWriter{w: w}
	return &Handler{
		json: slog.NewJSONHandler(lw, opts),
		w:    lw,
		fast: opts.ReplaceAttr == nil && !opts.AddSource,
	}
}

// lockedWriter makes each Write of a line exclusive.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (lw *lockedWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.w.Write(p)
}

// Enabled reports whether level is logged.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.json.Enabled(ctx, level)
}

// WithAttrs returns slog.JSONHandler's handler with attrs.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler { return h.json.WithAttrs(attrs) }

// WithGroup returns slog.JSONHandler's handler with the group.
func (h *Handler) WithGroup(name string) slog.Handler { return h.json.WithGroup(name) }

var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// Handle writes r as one JSON line.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if !h.fast || !simple(r) {
		return h.json.Handle(ctx, r)
	}
	bp := bufs.Get().(*[]byte)
	b := (*bp)[:0]
	b = append(b, '{')
	if !r.Time.IsZero() {
		b = append(b, `"time":"`...)
		b = appendTime(b, r.Time)
		b = append(b, `",`...)
	}
	b = append(b, `"level":`...)
	b = appendString(b, r.Level.String())
	b = append(b, `,"msg":`...)
	b = appendString(b, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b = append(b, ',')
		b = appendString(b, a.Key)
		b = append(b, ':')
		switch v := a.Value; v.Kind() {
		case slog.KindString:
			b = appendString(b, v.String())
		case slog.KindInt64:
			b = strconv.AppendInt(b, v.Int64(), 10)
		case slog.KindUint64:
			b = strconv.AppendUint(b, v.Uint64(), 10)
		case slog.KindBool:
			b = strconv.AppendBool(b, v.Bool())
		case slog.KindDuration:
			b = strconv.AppendInt(b, int64(v.Duration()), 10) // nanoseconds, as json.Marshal
		}
		return true
	})
	b = append(b, '}', '\n')
	_, err := h.w.Write(b)
	if cap(b) <= 64<<10 {
		*bp = b
		bufs.Put(bp)
	}
	return err
}

// simple reports whether every attribute of r has a key and a value of a
// kind the fast path encodes, and its time a year RFC 3339 can write.
func simple(r slog.Record) bool {
	if y := r.Time.Year(); !r.Time.IsZero() && (y < 0 || y >= 10000) {
		return false
	}
	ok := true
	r.Attrs(func(a slog.Attr) bool {
		switch a.Value.Kind() {
		case slog.KindString, slog.KindInt64, slog.KindUint64, slog.KindBool, slog.KindDuration:
			ok = a.Key != ""
		default:
			ok = false
		}
		return ok
	})
	return ok
}

// appendString appends s as a JSON string, escaped as slog.JSONHandler
// escapes it: '"', '\\' and control characters (\n, \r and \t by name,
// the others as \u00XX), invalid UTF-8 as \ufffd, and U+2028 and U+2029;
// not HTML's '<', '>' and '&'.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendTime appends t as t.AppendFormat(b, time.RFC3339Nano) does. Times
// in UTC (the zone of a server's log, and of time.Now in a container) are
// written digit by digit, without parsing the layout on every line; the
// caller has checked that the year has four digits.
func appendTime(b []byte, t time.Time) []byte {
	if _, offset := t.Zone(); offset != 0 {
		return t.AppendFormat(b, time.RFC3339Nano)
	}
	year, month, day := t.Date()
	hour, min, sec := t.Clock()
	b = appendDigits(b, year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, 'T')
	b = appendDigits(b, hour, 2)
	b = append(b, ':')
	b = appendDigits(b, min, 2)
	b = append(b, ':')
	b = appendDigits(b, sec, 2)
	if ns := t.Nanosecond(); ns != 0 {
		// A fraction without its trailing zeros, as ".999999999" writes.
		digits := 9
		for ns%10 == 0 {
			ns /= 10
			digits--
		}
		b = append(b, '.')
		b = appendDigits(b, ns, digits)
	}
	return append(b, 'Z')
}

// appendDigits appends n (not negative) in exactly width decimal digits.
func appendDigits(b []byte, n, width int) []byte {
	var d [9]byte
	for i := width - 1; i >= 0; i-- {
		d[i] = byte('0' + n%10)
		n /= 10
	}
	return append(b, d[:width]...)
}
