package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

// TestProgress: on a terminal one line is redrawn in place with count,
// bytes, rate and ETA, failures printed above it; elsewhere each package
// gets a plain line.
func TestProgress(t *testing.T) {
	clock := time.Unix(1000, 0)
	now := func() time.Time { return clock }
	it := syncItem{provider: addrs.Provider{Hostname: "registry.terraform.io", Namespace: "hashicorp", Type: "random"}, version: "3.6.0", platform: "linux_amd64"}

	var tty bytes.Buffer
	p := newProgress(&tty, true, 4, now)
	clock = clock.Add(2 * time.Second)
	p.done(it, 2<<20, nil)
	if got, want := p.line(), "[1/4] 2.0 MiB, 1.0 MiB/s, ETA 6s"; got != want {
		t.Errorf("line = %q, want %q", got, want)
	}
	p.done(it, 0, errors.New("boom"))
	out := tty.String()
	if !strings.HasPrefix(out, "\r\x1b[K[1/4] 2.0 MiB") || strings.Count(out, "\n") != 1 ||
		!strings.Contains(out, "\r\x1b[Kfailed: registry.terraform.io/hashicorp/random 3.6.0 linux_amd64: boom\n") ||
		!strings.HasSuffix(out, "[2/4] 2.0 MiB, 1.0 MiB/s, ETA 2s, 1 failed") {
		t.Errorf("terminal output %q", out)
	}

	var plain bytes.Buffer
	p = newProgress(&plain, false, 2, now)
	stop := p.start()
	p.done(it, 300, nil)
	p.done(it, 0, errors.New("boom"))
	stop()
	want := "[1/2] cached registry.terraform.io/hashicorp/random 3.6.0 linux_amd64 (300 B)\n" +
		"[2/2] failed: registry.terraform.io/hashicorp/random 3.6.0 linux_amd64: boom\n"
	if plain.String() != want {
		t.Errorf("plain output %q, want %q", plain.String(), want)
	}
	// A failure quoting what an origin sent is printed with its control
	// characters as escapes, on a terminal and elsewhere.
	for _, tty := range []bool{true, false} {
		var out bytes.Buffer
		p = newProgress(&out, tty, 1, now)
		p.done(it, 0, errors.New("origin said \x1b]0;owned\x07"))
		if got := out.String(); strings.ContainsAny(strings.ReplaceAll(got, "\r\x1b[K", ""), "\x07\x1b") || !strings.Contains(got, `origin said \x1b]0;owned\x07`) {
			t.Errorf("terminal %v: failure printed as %q", tty, got)
		}
	}
	if isTerminal(&plain) {
		t.Error("a buffer is a terminal")
	}
}
