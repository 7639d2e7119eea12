package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	"golang.org/x/term"
)

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	return term.IsTerminal(int(f.Fd()))
}

// progress shows how a sync goes: on a terminal one line redrawn in
// place (count, bytes, rate, ETA), elsewhere one plain line per package.
type progress struct {
	w     io.Writer
	tty   bool
	total int
	now   func() time.Time
	began time.Time

	mu     sync.Mutex
	count  int
	bytes  int64
	failed int
}

func newProgress(w io.Writer, tty bool, total int, now func() time.Time) *progress {
	return &progress{w: w, tty: tty, total: total, now: now, began: now()}
}

// redrawEvery is how often the terminal line is redrawn between packages,
// for the elapsed time and the ETA to move.
const redrawEvery = 500 * time.Millisecond

// start begins showing progress; stop ends it (on a terminal, the line is
// left as it last was, and the cursor moves to the next line).
func (p *progress) start() (stop func()) {
	if !p.tty {
		return func() {}
	}
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(redrawEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				p.mu.Lock()
				p.redraw()
				p.mu.Unlock()
			case <-quit:
				return
			}
		}
	}()
	return func() {
		close(quit)
		<-done
		p.mu.Lock()
		p.redraw()
		fmt.Fprintln(p.w)
		p.mu.Unlock()
	}
}

// done records a finished package: its archive's size, or its error,
// their control characters shown as escapes (shown), as sync's summary
// shows them: an error may quote what an origin sent.
func (p *progress) done(it syncItem, size int64, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.count++
	if err != nil {
		p.failed++
	} else {
		p.bytes += size
	}
	if p.tty {
		if err != nil {
			fmt.Fprintf(p.w, "\r\x1b[Kfailed: %s: %s\n", shown(it.String()), shown(err.Error()))
		}
		p.redraw()
		return
	}
	if err != nil {
		fmt.Fprintf(p.w, "[%d/%d] failed: %s: %s\n", p.count, p.total, shown(it.String()), shown(err.Error()))
		return
	}
	fmt.Fprintf(p.w, "[%d/%d] cached %s (%s)\n", p.count, p.total, shown(it.String()), humanize.IBytes(uint64(size)))
}

// redraw draws the terminal line; p.mu is held.
func (p *progress) redraw() {
	fmt.Fprintf(p.w, "\r\x1b[K%s", p.line())
}

// line is the progress line: count, bytes, rate and ETA (by count, the
// sizes of archives not yet fetched being unknown).
func (p *progress) line() string {
	elapsed := p.now().Sub(p.began)
	s := fmt.Sprintf("[%d/%d] %s", p.count, p.total, humanize.IBytes(uint64(p.bytes)))
	if secs := elapsed.Seconds(); secs > 0 {
		s += fmt.Sprintf(", %s/s", humanize.IBytes(uint64(float64(p.bytes)/secs)))
	}
	if p.count > 0 && p.count < p.total {
		eta := time.Duration(float64(elapsed) / float64(p.count) * float64(p.total-p.count))
		s += ", ETA " + eta.Round(time.Second).String()
	}
	if p.failed > 0 {
		s += fmt.Sprintf(", %d failed", p.failed)
	}
	return s
}
