// Package httpserve makes the process's HTTP servers (the front doors,
// the metrics listener, the admin socket) with one set of bounds on how
// long a client may keep a connection waiting: its request headers
// (HeaderTimeout, at most MaxHeaderBytes), its request body (BodyTimeout),
// the silence between its requests (IdleTimeout), and the reading of its
// answer (WriteStallTimeout), which bounds the progress of each write, not
// how long the whole answer takes: that is the client's to read at its
// pace (an archive to a slow link). It does not bound what a handler does
// with the body it reads (each bounds that in bytes).
package httpserve

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"
)

// The bounds of New.
const (
	// HeaderTimeout bounds the reading of a request's headers.
	HeaderTimeout = 10 * time.Second
	// BodyTimeout bounds the reading of a request's body, from the time
	// its handler starts: a request that declares a body and does not
	// send it (the front doors read one only to let it go) would
	// otherwise hold its connection for good, as Go's server reads up to
	// 256 KiB of an unread body before it answers. Past it, the body's
	// reads fail and the connection is closed once answered.
	BodyTimeout = 10 * time.Second
	// IdleTimeout bounds the wait for the next request on a kept-alive
	// connection.
	IdleTimeout = 2 * time.Minute
	// WriteStallTimeout bounds how long one write of an answer (at most
	// 64 KiB of it, see stallChunk) may wait for the client to take it: a
	// client that stops reading, or reads a byte a minute, is cut off
	// then, and its handler's write fails (the client gone), where it held
	// the handler, its connection and what the handler reads (an archive
	// being downloaded) for good. Only a write in progress is timed, so a
	// handler may wait as long as it needs between writes (an origin's
	// slow download), and a slow link that keeps taking bytes may take
	// hours over a large archive. As long as IdleTimeout: a client may
	// keep a connection silent for 2 minutes, between its requests or in
	// the middle of an answer, not longer. It must exceed BodyTimeout:
	// Go's server reads a declared body the handler left unread before it
	// writes the answer's headers, within a write.
	WriteStallTimeout = 2 * time.Minute
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes = 64 << 10
	// MaxConcurrentStreams bounds the requests one HTTP/2 connection
	// (--http2) runs at once; a stream its client opens beyond them is
	// refused (reset), never started. Net/http's default is 250, which
	// let one connection hold as many handlers, and what each holds (a
	// cached archive's file, an origin's connection), where
	// --max-connections meant one request in flight per connection.
	// Terraform and OpenTofu ask one thing at a time, a browser on the
	// status page a few; Go's client, told this bound, opens another
	// connection rather than exceed it.
	MaxConcurrentStreams = 8
)

type bounds struct {
	header, body, idle, stall time.Duration
}

// New returns a server of h with the bounds above; errLog receives the
// server's own errors (a TLS handshake that failed, ...). The caller sets
// what else it needs (TLSConfig, BaseContext, ConnContext) before serving.
func New(h http.Handler, errLog *log.Logger) *http.Server {
	return NewWriteStall(h, errLog, WriteStallTimeout)
}

// NewWriteStall is New with stall in place of WriteStallTimeout: for the
// tests of a front door, which cannot wait minutes for a stalled client
// to be cut off.
func NewWriteStall(h http.Handler, errLog *log.Logger, stall time.Duration) *http.Server {
	return newServer(h, errLog, bounds{header: HeaderTimeout, body: BodyTimeout, idle: IdleTimeout, stall: stall})
}

func newServer(h http.Handler, errLog *log.Logger, b bounds) *http.Server {
	return &http.Server{
		Handler:           firstRequest(writeStall(bodyDeadline(h, b.body), b.stall)),
		ConnContext:       watchFirstRequest(2 * b.header),
		ReadHeaderTimeout: b.header,
		IdleTimeout:       b.idle,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          errLog,
		// HTTP/2 (offered over TLS with --http2) writes a connection's
		// frames on a goroutine of its own, which writeStall does not
		// reach: a connection it cannot write to for stall is closed,
		// its streams with it. Without it a stream's deadline would not
		// free its handler either: the stream's reset is a frame, queued
		// behind the stalled ones.
		HTTP2: &http.HTTP2Config{WriteByteTimeout: b.stall, MaxConcurrentStreams: MaxConcurrentStreams},
	}
}

// firstRequestKey is the context key of a connection's watchFirstRequest
// timer.
type firstRequestKey struct{}

// watchFirstRequest is a server's ConnContext that closes each connection
// whose first request has not reached its handler (firstRequest) within
// d of its being accepted: the TLS handshake (net/http gives it the
// header bound) and the request's headers (as long). HTTP/1.1 has the
// header bound for them already (ReadHeaderTimeout), and meets this one
// first; HTTP/2 has none: a client that sent its preface and then no
// request, or the start of a header block and never its end, held its
// connection, and a --max-connections slot, until IdleTimeout. A
// caller's own ConnContext (the admin socket's) replaces it.
func watchFirstRequest(d time.Duration) func(context.Context, net.Conn) context.Context {
	return func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, firstRequestKey{}, time.AfterFunc(d, func() { c.Close() }))
	}
}

// firstRequest stops the watchFirstRequest timer of its request's
// connection, whose first request has so arrived.
func firstRequest(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if t, ok := r.Context().Value(firstRequestKey{}).(*time.Timer); ok {
			t.Stop()
		}
		h.ServeHTTP(w, r)
	})
}

// bodyDeadline gives a request that declares a body d to send it: the
// connection's reads fail past that time until the body has been read to
// its end, when the deadline is lifted. A request without a body is left
// alone: a read deadline on its connection would end the read with which
// the server watches for the client going away, and cancel the request's
// context while its answer is still being written. Over HTTP/2 the
// deadline is the stream's, which touches neither, and an HTTP/2 request
// whose ContentLength is 0 may still have a body open: its client said
// content-length: 0 (or no number) and has not ended its stream, and
// its body's reads wait for that end. Such a request gets d too, as does
// one whose stream has ended (its body's first read lifts it).
func bodyDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ProtoMajor < 2 && r.ContentLength == 0 && len(r.TransferEncoding) == 0 {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
			h.ServeHTTP(w, r) // a connection without deadlines (a test's recorder)
			return
		}
		r.Body = &deadlineBody{ReadCloser: r.Body, lift: func() { rc.SetReadDeadline(time.Time{}) }}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the read deadline once its body is read to the end.
type deadlineBody struct {
	io.ReadCloser
	once sync.Once
	lift func()
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.lift)
	}
	return n, err
}
