package logbound

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// A flood of warnings is logged as its burst at warn and the rest at
// debug; once the rate lets one through again, it says how many went to
// debug.
func TestWarningsBounded(t *testing.T) {
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w := New(rate.Limit(1), 3, "at_debug")
	now := time.Unix(1_700_000_000, 0)
	for i := range 10 {
		w.Log(log, now, "refused", "n", i)
	}
	count := func(level string) int { return strings.Count(logs.String(), "level="+level+" msg=refused") }
	if wn, d := count("WARN"), count("DEBUG"); wn != 3 || d != 7 {
		t.Fatalf("10 at once: %d at warn and %d at debug, want 3 and 7\n%s", wn, d, logs.String())
	}
	logs.Reset()
	w.Log(log, now.Add(time.Second), "refused", "n", 10)
	if got := logs.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, "at_debug=7") {
		t.Fatalf("a second later: %q, want a warning saying 7 went to debug", got)
	}
	logs.Reset()
	w.Log(log, now.Add(2*time.Second), "refused")
	if got := logs.String(); strings.Contains(got, "at_debug") {
		t.Fatalf("with none at debug since: %q, want no count", got)
	}

	logs.Reset()
	quiet := New(rate.Limit(1), 1, "")
	quiet.Log(log, now, "refused")
	quiet.Log(log, now, "refused")
	quiet.Log(log, now.Add(time.Second), "refused")
	got := logs.String()
	if strings.Count(got, "level=WARN") != 2 || strings.Count(got, "level=DEBUG") != 1 {
		t.Fatalf("without a count key, 2 at once and 1 a second later: %q, want 2 at warn, 1 at debug", got)
	}
	for line := range strings.Lines(got) {
		if !strings.HasSuffix(line, "msg=refused\n") {
			t.Fatalf("without a count key: %q, want no attribute added", line)
		}
	}
}

// LogAt logs within the bound at the level it is given, beyond it at
// debug, as Log does at warn.
func TestLogAtLevel(t *testing.T) {
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w := New(rate.Limit(1), 2, "at_debug")
	now := time.Unix(1_700_000_000, 0)
	for range 5 {
		w.LogAt(log, now, slog.LevelInfo, "failed")
	}
	w.LogAt(log, now.Add(time.Second), slog.LevelInfo, "failed")
	got := logs.String()
	if i, d, wn := strings.Count(got, "level=INFO"), strings.Count(got, "level=DEBUG"), strings.Count(got, "level=WARN"); i != 3 || d != 3 || wn != 0 {
		t.Fatalf("%d at info, %d at debug, %d at warn, want 3, 3 and 0:\n%s", i, d, wn, got)
	}
	if !strings.Contains(got, "level=INFO msg=failed at_debug=3") {
		t.Fatalf("a second later, no count of those at debug:\n%s", got)
	}
}

// Cut keeps a string within its bound, says how much more it had, and
// splits no rune; one within it is kept whole.
func TestCut(t *testing.T) {
	for _, tc := range []struct {
		s    string
		max  int
		want string
	}{
		{"short", 8, "short"},
		{"exactly8", 8, "exactly8"},
		{"0123456789", 4, "0123... (6 bytes more)"},
		{"ab\u00e9cd", 3, "ab... (3 bytes more)"}, // é is two bytes: not split, counted past the bound
	} {
		if got := Cut(tc.s, tc.max); got != tc.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", tc.s, tc.max, got, tc.want)
		}
	}
}

// Escaped writes every control and format character as an escape a
// terminal shows as text, and leaves the rest, and a string without
// them, as it is.
func TestEscaped(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain/1.0 (ünïcode)", "plain/1.0 (ünïcode)"},
		{"title\x1b]0;owned\x07", `title\x1b]0;owned\x07`},
		{"csi\u009b2J", `csi\x9b2J`},
		{"bad\u202eft.niam\u2066\u200d.tf", `bad\u202eft.niam\u2066\u200d.tf`},
		{"tag\U000E0001", `tag\U000e0001`},
	} {
		if got := Escaped(tc.in); got != tc.want {
			t.Errorf("Escaped(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
