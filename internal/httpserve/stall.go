package httpserve

import (
	"bufio"
	"net"
	"net/http"
	"time"
)

// stallChunk is the most a handler's write hands to the connection under
// one deadline: a larger write is made in pieces of this size, each with
// a deadline of its own, so that a client that keeps taking bytes is
// never cut off however large the write (one 100 MiB write of a cached
// archive), and one that takes none is cut off after d whatever it is.
// A client must so take 64 KiB every WriteStallTimeout once the socket
// buffers between it and the mirror are full (some 550 bytes a second,
// far below any link's speed). Each piece is a write of its own to the
// connection: at 32 KiB, plain HTTP/1.1 on loopback moved a large answer
// some 20% slower than in 256 KiB writes; at 64 KiB some 10%, and over
// TLS (records of 16 KiB) no slower; the deadlines themselves cost
// nothing measurable.
const stallChunk = 64 << 10

// writeStall gives each write of a response d to reach the connection:
// the connection's write deadline (http.ResponseController.SetWriteDeadline)
// is set right before each write and lifted right after it, so it bounds
// the client's reading, never the time a handler takes between writes
// (over HTTP/2 a deadline left set would reset the stream while the
// handler waits). When the handler returns, d is set again for what the
// server still has to write (a buffered tail, the final chunk), and the
// server lifts it once the answer is out. A writer without deadlines (a
// test's recorder) is passed through, as bodyDeadline does.
//
// A write past its deadline fails and the server cancels the request's
// context (HTTP/1.1: the connection is closed; HTTP/2: the stream is
// reset), so the handler sees its client gone and returns, releasing what
// it held; what it shared with other clients (an engine's download) is not
// its to cancel and goes on.
func writeStall(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if d <= 0 || rc.SetWriteDeadline(time.Time{}) != nil {
			h.ServeHTTP(w, r)
			return
		}
		sw := &stallWriter{ResponseWriter: w, rc: rc, d: d}
		h.ServeHTTP(sw, r)
		// An HTTP/2 stream already gone (its client reset it) keeps a
		// deadline set now as a timer that would reset it again later.
		if !sw.hijacked && (r.ProtoMajor < 2 || r.Context().Err() == nil) {
			sw.arm()
		}
	})
}

// stallWriter is the ResponseWriter of writeStall. Its deadline is armed
// only while one of its writes (Write, Flush) is under way. Like any
// ResponseWriter it is used by one goroutine at a time. It has no
// ReadFrom: the one within (HTTP/1.1's) would copy all of its source under
// one deadline, so io.Copy to it goes through Write, piece by piece; what
// that gives up is sendfile from an *os.File over plain TCP, which no
// handler of the mirror serves from (archives are read from the cache).
type stallWriter struct {
	http.ResponseWriter
	rc       *http.ResponseController // of the ResponseWriter within
	d        time.Duration
	hijacked bool // the connection is the handler's: its deadlines too
}

func (w *stallWriter) arm()    { w.rc.SetWriteDeadline(time.Now().Add(w.d)) }
func (w *stallWriter) disarm() { w.rc.SetWriteDeadline(time.Time{}) }

// Write writes p in pieces of at most stallChunk bytes, each within d.
func (w *stallWriter) Write(p []byte) (int, error) {
	if w.hijacked {
		return w.ResponseWriter.Write(p) // http.ErrHijacked, deadlines untouched
	}
	var n int
	for {
		piece := p[n:min(len(p), n+stallChunk)]
		w.arm()
		m, err := w.ResponseWriter.Write(piece)
		w.disarm()
		n += m
		if err != nil || n >= len(p) {
			return n, err
		}
	}
}

// FlushError flushes within d; http.ResponseController.Flush calls it.
func (w *stallWriter) FlushError() error {
	if w.hijacked {
		return http.ErrHijacked
	}
	w.arm()
	err := w.rc.Flush()
	w.disarm()
	return err
}

// Flush is FlushError for those who assert http.Flusher.
func (w *stallWriter) Flush() { _ = w.FlushError() }

// Hijack hands the connection to the handler, with no deadline of
// writeStall's set and none set after.
func (w *stallWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := w.rc.Hijack()
	if err == nil {
		w.hijacked = true
	}
	return c, rw, err
}

// WriteHeader sends an informational (1xx) header, which is written at
// once, within d; any other is only kept until the first write.
func (w *stallWriter) WriteHeader(code int) {
	if w.hijacked || code >= 200 {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.arm()
	w.ResponseWriter.WriteHeader(code)
	w.disarm()
}

// Unwrap lets http.ResponseController reach the ResponseWriter within
// (read deadlines, full duplex). Write deadlines are writeStall's: one a
// handler sets is replaced at its next write.
func (w *stallWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
