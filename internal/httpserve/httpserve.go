// Package httpserve makes the process's HTTP servers (the front doors,
// the metrics listener, the admin socket) with one set of bounds on how
// long a client may keep a connection waiting: its request headers
// (HeaderTimeout, at most MaxHeaderBytes), its request body (BodyTimeout),
// and the silence between its requests (IdleTimeout). It does not bound
// how long an answer takes to send, which is the client's to read at its
// pace (an archive to a slow link), nor what a handler does with the body
// it reads (each bounds that in bytes).
package httpserve

import (
	"io"
	"log"
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
	// send it (the front doors never read one) would otherwise hold its
	// connection for good, as Go's server reads up to 256 KiB of an
	// unread body before it answers. Past it, the body's reads fail and
	// the connection is closed once answered.
	BodyTimeout = 10 * time.Second
	// IdleTimeout bounds the wait for the next request on a kept-alive
	// connection.
	IdleTimeout = 2 * time.Minute
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes = 64 << 10
)

type bounds struct {
	header, body, idle time.Duration
}

// New returns a server of h with the bounds above; errLog receives the
// server's own errors (a TLS handshake that failed, ...). The caller sets
// what else it needs (TLSConfig, BaseContext, ConnContext) before serving.
func New(h http.Handler, errLog *log.Logger) *http.Server {
	return newServer(h, errLog, bounds{header: HeaderTimeout, body: BodyTimeout, idle: IdleTimeout})
}

func newServer(h http.Handler, errLog *log.Logger, b bounds) *http.Server {
	return &http.Server{
		Handler:           bodyDeadline(h, b.body),
		ReadHeaderTimeout: b.header,
		IdleTimeout:       b.idle,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          errLog,
	}
}

// bodyDeadline gives a request that declares a body d to send it: the
// connection's reads fail past that time until the body has been read to
// its end, when the deadline is lifted. A request without a body is left
// alone: a read deadline on its connection would end the read with which
// the server watches for the client going away, and cancel the request's
// context while its answer is still being written.
func bodyDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 && len(r.TransferEncoding) == 0 {
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
