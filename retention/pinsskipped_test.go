package retention

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// What a pin source could not read (files nested too deep) is logged as a
// warning when the pins are read, not taken in silence.
func TestPinsSkippedIsLogged(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	why := "1 directory deeper than 8 under /pins not read: /pins/a/b"
	p := &pinState{src: &staticPins{pins: &Pins{Skipped: why}, changed: true}}
	if !p.read(log) {
		t.Fatal("the pins read are no change")
	}
	if !strings.Contains(buf.String(), "level=WARN") || !strings.Contains(buf.String(), "/pins/a/b") {
		t.Errorf("the log: %q", buf.String())
	}
	if p.read(log); strings.Count(buf.String(), "/pins/a/b") != 1 {
		t.Errorf("logged again with nothing read again: %q", buf.String())
	}
}
