package lifetime

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/observed"
)

// A cached list served stale to request after request, its origin down,
// is logged at warn the first times only; the rest at debug, each
// with the error and the caller's attributes.
func TestLogStaleBounded(t *testing.T) {
	l := New(0, nil, nil)
	logs := &observed.Logs{}
	log := slog.New(logs)
	const n = 200
	for range n {
		l.LogStale(log, StaleMessage(errors.New("origin down"), "version list"), "provider", "example.com/a/b", "error", errors.New("origin down"))
	}
	recs := logs.Records()
	if len(recs) != n {
		t.Fatalf("%d lines for %d stale answers, want one each", len(recs), n)
	}
	warned := len(logs.AtLeast(slog.LevelWarn))
	if warned == 0 || warned > staleWarnBurst+1 {
		t.Errorf("%d at warn for %d stale answers, want at least one and at most %d", warned, n, staleWarnBurst+1)
	}
	if recs[0].Message != StaleMessage(errors.New("x"), "version list") {
		t.Errorf("message %q", recs[0].Message)
	}
	attrs := map[string]string{}
	recs[0].Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	if attrs["provider"] != "example.com/a/b" || attrs["error"] != "origin down" {
		t.Errorf("attributes %v, want the caller's and the error", attrs)
	}
}
