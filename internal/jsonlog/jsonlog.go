// Package jsonlog is log/slog's JSON handler with a faster way through for
// the records a server writes on every request (the access log): records
// whose attributes are all strings, integers, booleans and durations,
// added one by one or held in a Fields value, are encoded here in a single
// pass, byte for byte as slog.JSONHandler encodes them, without slog's
// general machinery and without allocating; every other record, and every
// handler derived with WithAttrs or WithGroup, is slog.JSONHandler's.
package jsonlog

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tfmirror/tfmirror/v2/internal/logwriter"
)

// Handler writes JSON lines as slog.JSONHandler does. Create it with New.
type Handler struct {
	json *slog.JSONHandler    // everything the fast path does not take
	w    *logwriter.Exclusive // shared with json, so that lines never interleave
	fast bool                 // options leave the output to the built-in keys and attributes
}

// New returns a Handler writing to w with opts (nil: the defaults), as
// slog.NewJSONHandler(w, opts) would. Its lines are written whole through
// a logwriter.Exclusive: w itself when it is one (shared with other
// writers of w), else one of its own.
func New(w io.Writer, opts *slog.HandlerOptions) *Handler {
	if opts == nil {
		opts = &slog.HandlerOptions{}
	}
	lw, ok := w.(*logwriter.Exclusive)
	if !ok {
		lw = logwriter.NewExclusive(w)
	}
	return &Handler{
		json: slog.NewJSONHandler(lw, opts),
		w:    lw,
		fast: opts.ReplaceAttr == nil && !opts.AddSource,
	}
}

// Enabled reports whether level is logged.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.json.Enabled(ctx, level)
}

// WithAttrs returns slog.JSONHandler's handler with attrs.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler { return h.json.WithAttrs(attrs) }

// WithGroup returns slog.JSONHandler's handler with the group.
func (h *Handler) WithGroup(name string) slog.Handler { return h.json.WithGroup(name) }

// Fields stands for several attributes of a record: log it as
// slog.Any("", f). Every slog handler resolves it with LogValue, which
// must return slog.GroupValue of the attributes that Attrs yields, and
// writes a group without a key inline, as if each of its attributes had
// been added to the record; Handler's fast path reads them with Attrs
// instead, without building the group. A server's access log uses it to
// keep each request's line in one value that it already allocated, where
// ten attributes added to a record one by one would take an allocation of
// their own.
type Fields interface {
	slog.LogValuer
	// Attrs calls yield with each attribute, in order, until it returns
	// false.
	Attrs(yield func(slog.Attr) bool)
}

// encoder appends a record's attributes to b until one is not its to
// encode. Encoders are pooled with their buffers; yield is bound once, so
// that handing it to Record.Attrs and Fields.Attrs allocates nothing.
type encoder struct {
	b     []byte
	ok    bool
	yield func(slog.Attr) bool // e.attr

	second []byte // "2006-01-02T15:04:05" of the Unix second sec, once written
	sec    int64
}

var encoders = sync.Pool{New: func() any {
	e := &encoder{b: make([]byte, 0, 1024)}
	e.yield = e.attr
	return e
}}

// Handle writes r as one JSON line.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if !h.fast || !timeFits(r.Time) {
		return h.json.Handle(ctx, r)
	}
	e := encoders.Get().(*encoder)
	defer func() {
		if cap(e.b) <= 64<<10 {
			encoders.Put(e)
		}
	}()
	if !e.record(r) {
		return h.json.Handle(ctx, r)
	}
	_, err := h.w.Write(e.b)
	return err
}

// timeFits reports whether t is zero or has a year RFC 3339 can write.
func timeFits(t time.Time) bool {
	if t.IsZero() {
		return true
	}
	y := t.Year()
	return y >= 0 && y < 10000
}

// record sets e.b to r as one JSON line, and reports false (leaving the
// rest to slog.JSONHandler) at the first attribute it does not encode.
func (e *encoder) record(r slog.Record) bool {
	b := append(e.b[:0], '{')
	if !r.Time.IsZero() {
		b = append(b, `"time":"`...)
		b = e.time(b, r.Time)
		b = append(b, `",`...)
	}
	b = append(b, `"level":`...)
	b = appendString(b, r.Level.String())
	b = append(b, `,"msg":`...)
	e.b = appendString(b, r.Message)
	e.ok = true
	r.Attrs(e.yield)
	e.b = append(e.b, '}', '\n')
	return e.ok
}

// attr appends a, and reports false if a has no key (and is not Fields)
// or a value of a kind the fast path does not encode.
func (e *encoder) attr(a slog.Attr) bool {
	v := a.Value
	if a.Key == "" {
		// Only Fields may go without a key: slog writes them inline.
		if v.Kind() == slog.KindLogValuer {
			if f, isFields := v.Any().(Fields); isFields {
				f.Attrs(e.yield)
				return e.ok
			}
		}
		e.ok = false
		return false
	}
	b := append(e.b, ',')
	b = appendString(b, a.Key)
	b = append(b, ':')
	switch v.Kind() {
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
	default:
		e.ok = false
	}
	e.b = b
	return e.ok
}

// plain[c] says whether ASCII byte c is written as itself in a JSON string.
var plain = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// invalidUTF8 is what slog.JSONHandler writes for a byte that is not
// UTF-8, as the Go release the program was built with has it write: the
// escape \ufffd up to Go 1.26, the character U+FFFD itself from Go 1.27.
var invalidUTF8 = func() string {
	var b strings.Builder
	slog.NewJSONHandler(&b, nil).Handle(context.Background(), slog.NewRecord(time.Time{}, slog.LevelInfo, "\xff", 0)) //nolint:errcheck // a Builder does not fail
	if strings.Contains(b.String(), `"msg":"\ufffd"`) {
		return `\ufffd`
	}
	return "\ufffd"
}()

// appendString appends s as a JSON string, escaped as slog.JSONHandler
// escapes it: '"', '\\' and control characters (\n, \r and \t by name,
// the others as \u00XX), invalid UTF-8 as slog writes it (invalidUTF8),
// and U+2028 and U+2029; not HTML's '<', '>' and '&'.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		for i+8 <= len(s) && plainWord(s[i:i+8]) {
			i += 8
		}
		if i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if plain[c] {
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
			b = append(b, invalidUTF8...)
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

// plainWord reports whether all 8 bytes of w are plain (see plain): none
// is below 0x20, '"', '\\' or outside ASCII. It tests the 8 bytes at once,
// with the bit tricks for "has a byte less than n" and "has a zero byte".
func plainWord(w string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
	quote, backslash := x^(ones*'"'), x^(ones*'\\')
	special := x | // outside ASCII
		(x - ones*0x20) | // below 0x20 (exact once no byte is outside ASCII)
		(quote-ones)&^quote | // '"'
		(backslash-ones)&^backslash // '\\'
	return special&highs == 0
}

// time appends t as t.AppendFormat(b, time.RFC3339Nano) does. Times in
// UTC (the zone of a server's log, and of time.Now in a container) are
// written digit by digit, without parsing the layout on every line, and
// the date and time of the last second written are remembered: the lines
// of one second differ only in their fraction. The caller has checked
// that the year has four digits.
func (e *encoder) time(b []byte, t time.Time) []byte {
	if _, offset := t.Zone(); offset != 0 {
		return t.AppendFormat(b, time.RFC3339Nano)
	}
	if sec := t.Unix(); sec != e.sec || len(e.second) == 0 {
		e.second, e.sec = appendSeconds(e.second[:0], t.UTC()), sec
	}
	return appendFraction(append(b, e.second...), t.Nanosecond())
}

// appendSeconds appends t (in UTC) to the second, as "2006-01-02T15:04:05".
func appendSeconds(b []byte, t time.Time) []byte {
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
	return appendDigits(b, sec, 2)
}

// appendFraction appends ns nanoseconds as ".999999999Z" writes them:
// without trailing zeros, nothing but the 'Z' for none.
func appendFraction(b []byte, ns int) []byte {
	if ns != 0 {
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
