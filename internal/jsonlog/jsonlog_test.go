package jsonlog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// both writes r with a Handler and with slog.JSONHandler and returns what
// each wrote.
func both(t testing.TB, opts *slog.HandlerOptions, r slog.Record) (got, want string) {
	t.Helper()
	var g, w bytes.Buffer
	if err := New(&g, opts).Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if err := slog.NewJSONHandler(&w, opts).Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return g.String(), w.String()
}

func record(tm time.Time, level slog.Level, msg string, attrs ...slog.Attr) slog.Record {
	r := slog.NewRecord(tm, level, msg, 0)
	r.AddAttrs(attrs...)
	return r
}

// Every record is written byte for byte as slog.JSONHandler writes it,
// whether the fast path takes it or not.
func TestSameAsSlog(t *testing.T) {
	at := time.Date(2026, 11, 23, 17, 0, 0, 123456000, time.UTC)
	tests := []struct {
		name string
		r    slog.Record
		opts *slog.HandlerOptions
	}{
		{name: "access log line", r: record(at, slog.LevelInfo, "request",
			slog.String("request_id", "0123456789abcdef"), slog.String("method", "GET"),
			slog.String("path", "/registry.terraform.io/hashicorp/random/index.json"), slog.String("route", "index"),
			slog.Int("status", 200), slog.Int64("bytes", 734), slog.Duration("duration", 12345*time.Nanosecond),
			slog.String("cache", ""), slog.Bool("aborted", false), slog.String("user_agent", "Go-http-client/1.1"))},
		{name: "no attributes", r: record(at, slog.LevelWarn, "hello")},
		{name: "zero time", r: record(time.Time{}, slog.LevelError, "no time")},
		{name: "time with a zone and monotonic clock", r: record(time.Now().In(time.FixedZone("X", 5*3600+1800)), slog.LevelInfo, "m")},
		{name: "whole seconds", r: record(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), slog.LevelDebug, "m")},
		{name: "level between names", r: record(at, slog.LevelInfo+2, "m")},
		{name: "negative level", r: record(at, slog.LevelDebug-3, "m")},
		{name: "escapes", r: record(at, slog.LevelInfo, "quote \" backslash \\ nl \n cr \r tab \t nul \x00 esc \x1b del \x7f <>& é 😀 \u2028 \u2029 bad \xff\xfe end",
			slog.String("k\"ey\n", "v\x01\xc3"), slog.String("ua", "curl/8 (\"x\") <script>"))},
		{name: "numbers and booleans", r: record(at, slog.LevelInfo, "m", slog.Int("neg", -42), slog.Uint64("big", 1<<63),
			slog.Bool("t", true), slog.Duration("d", -time.Second), slog.Int64("max", 1<<63-1))},
		{name: "an error (slog's path)", r: record(at, slog.LevelError, "request failed", slog.String("path", "/x"), slog.Any("error", errors.New("boom \"x\"")))},
		{name: "a group (slog's path)", r: record(at, slog.LevelInfo, "m", slog.Group("g", slog.Int("a", 1)), slog.String("b", "c"))},
		{name: "a float (slog's path)", r: record(at, slog.LevelInfo, "m", slog.Float64("f", 1e21))},
		{name: "a time attribute (slog's path)", r: record(at, slog.LevelInfo, "m", slog.Time("stored_at", at))},
		{name: "an empty key (slog's path)", r: record(at, slog.LevelInfo, "m", slog.String("", "v"), slog.Attr{})},
		{name: "year 10000 (slog's path)", r: record(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), slog.LevelInfo, "m")},
		{name: "ReplaceAttr (slog's path)", r: record(at, slog.LevelInfo, "m", slog.String("a", "b")),
			opts: &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { a.Key = strings.ToUpper(a.Key); return a }}},
		{name: "AddSource (slog's path)", r: record(at, slog.LevelInfo, "m"), opts: &slog.HandlerOptions{AddSource: true}},
		{name: "fields inline", r: record(at, slog.LevelInfo, "request", slog.String("before", "x"),
			slog.Any("", fields{slog.String("a", "1"), slog.Int("n", 2), slog.Bool("b", true)}), slog.String("after", "y"))},
		{name: "fields in fields", r: record(at, slog.LevelInfo, "m",
			slog.Any("", fields{slog.String("a", "1"), slog.Any("", fields{slog.Duration("d", time.Millisecond)})}))},
		{name: "empty fields", r: record(at, slog.LevelInfo, "m", slog.Any("", fields{}), slog.String("k", "v"))},
		{name: "fields with an error (slog's path)", r: record(at, slog.LevelInfo, "m",
			slog.Any("", fields{slog.String("a", "1"), slog.Any("error", errors.New("boom"))}))},
		{name: "fields under a key (slog's path)", r: record(at, slog.LevelInfo, "m", slog.Any("g", fields{slog.String("a", "1")}))},
		{name: "another LogValuer without a key (slog's path)", r: record(at, slog.LevelInfo, "m", slog.Any("", valuer{}))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, want := both(t, tc.opts, tc.r)
			if got != want {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}

// fields is a Fields of a fixed list of attributes.
type fields []slog.Attr

func (f fields) LogValue() slog.Value { return slog.GroupValue(f...) }

func (f fields) Attrs(yield func(slog.Attr) bool) {
	for _, a := range f {
		if !yield(a) {
			return
		}
	}
}

// valuer is a LogValuer that is not Fields.
type valuer struct{}

func (valuer) LogValue() slog.Value { return slog.GroupValue(slog.String("from", "valuer")) }

// The fast path takes records with Fields without allocating.
func TestFieldsWithoutAllocating(t *testing.T) {
	if raceEnabled {
		t.Skip("under the race detector sync.Pool drops pooled encoders at random")
	}
	h := New(discard{}, nil)
	r := record(time.Now(), slog.LevelInfo, "request", slog.Any("", fields{slog.String("a", "1"), slog.Int("n", 2)}))
	if n := testing.AllocsPerRun(100, func() { h.Handle(context.Background(), r) }); n != 0 {
		t.Errorf("%v allocations per line, want 0", n)
	}
}

func FuzzSameAsSlog(f *testing.F) {
	f.Add("request", "path", "/a/b/c", "GET", int64(200), int64(12345), true, int64(1700000000123456789))
	f.Add("m\n\"", "k\\", "\xff\u2028<>&", "\x00", int64(-1), int64(-5), false, int64(0))
	f.Fuzz(func(t *testing.T, msg, key, val, method string, status, dur int64, aborted bool, unixNano int64) {
		r := record(time.Unix(0, unixNano).UTC(), slog.LevelInfo, msg,
			slog.String(key, val), slog.String("method", method), slog.Int64("status", status),
			slog.Duration("duration", time.Duration(dur)), slog.Bool("aborted", aborted))
		got, want := both(t, nil, r)
		if got != want {
			t.Errorf("got  %q\nwant %q", got, want)
		}
	})
}

// encoder.time writes what time.RFC3339Nano does, in every zone.
func FuzzAppendTime(f *testing.F) {
	f.Add(int64(1700000000123456789), 0)
	f.Add(int64(0), 3600)
	f.Add(int64(-62135596800), 0) // year 1
	f.Add(int64(1<<63-1), 0)      // 2262
	f.Add(int64(1700000000000000100), -1800)
	f.Fuzz(func(t *testing.T, unixNano int64, offset int) {
		tm := time.Unix(0, unixNano).UTC()
		if offset%(24*3600) != 0 {
			tm = tm.In(time.FixedZone("", offset%(24*3600)))
		}
		if y := tm.Year(); y < 0 || y >= 10000 {
			t.Skip("the caller hands such years to slog")
		}
		want := tm.Format(time.RFC3339Nano)
		if got := string(new(encoder).time(nil, tm)); got != want {
			t.Errorf("encoder.time(%v) = %s, want %s", tm, got, want)
		}
		// An encoder remembers the second it last wrote: a time in the
		// same second, one in another second, and the first again.
		var e encoder
		other := tm.Add(time.Duration(unixNano%1000) * time.Millisecond)
		if y := other.Year(); y < 0 || y >= 10000 {
			other = tm
		}
		for _, at := range []time.Time{tm, tm.Truncate(time.Second), other, tm} {
			if got, want := string(e.time(nil, at)), at.Format(time.RFC3339Nano); got != want {
				t.Errorf("encoder.time(%v) = %s, want %s", at, got, want)
			}
		}
	})
}

// plainWord agrees with plain for every byte at every position.
func TestPlainWord(t *testing.T) {
	for pos := range 8 {
		for c := range 256 {
			w := []byte("abcdefgh")
			w[pos] = byte(c)
			want := c < len(plain) && plain[c]
			if got := plainWord(string(w)); got != want {
				t.Errorf("plainWord(%q) = %v, want %v", w, got, want)
			}
		}
	}
}

// Levels below the configured one are not enabled, and derived handlers
// write to the same writer without interleaving lines.
func TestLevelsAndDerivedHandlers(t *testing.T) {
	var buf syncBuffer
	h := New(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})
	if h.Enabled(context.Background(), slog.LevelDebug) || !h.Enabled(context.Background(), slog.LevelWarn) {
		t.Error("Enabled does not follow the configured level")
	}
	root := slog.New(h)
	derived := root.With("component", "cache").WithGroup("g")
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if i%2 == 0 {
					root.LogAttrs(context.Background(), slog.LevelInfo, "request", slog.String("path", strings.Repeat("x", 500)))
				} else {
					derived.Info("other", "n", 1)
				}
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
	}
}

// syncBuffer is a bytes.Buffer that reports concurrent writes to the race
// detector instead of serialising them.
type syncBuffer struct{ bytes.Buffer }

func BenchmarkAccessLine(b *testing.B) {
	r := record(time.Now(), slog.LevelInfo, "request",
		slog.String("request_id", "0123456789abcdef"), slog.String("method", "GET"),
		slog.String("path", "/registry.terraform.io/hashicorp/random/index.json"), slog.String("route", "index"),
		slog.Int("status", 200), slog.Int64("bytes", 734), slog.Duration("duration", 12345*time.Nanosecond),
		slog.String("cache", ""), slog.Bool("aborted", false), slog.String("user_agent", "Go-http-client/1.1"))
	for _, bc := range []struct {
		name string
		h    slog.Handler
	}{{"jsonlog", New(discard{}, nil)}, {"slog", slog.NewJSONHandler(discard{}, nil)}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.h.Handle(context.Background(), r)
			}
		})
	}
	// The same line as one Fields attribute, as the access log writes it.
	var attrs fields
	r.Attrs(func(a slog.Attr) bool { attrs = append(attrs, a); return true })
	rf := record(r.Time, r.Level, r.Message, slog.Any("", attrs))
	b.Run("jsonlog-fields", func(b *testing.B) {
		b.ReportAllocs()
		h := New(discard{}, nil)
		for b.Loop() {
			h.Handle(context.Background(), rf)
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
