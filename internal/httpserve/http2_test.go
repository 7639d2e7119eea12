package httpserve

import (
	"bytes"
	"crypto/tls"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Conn is a hostile HTTP/2 client's connection to ts: TLS with h2
// negotiated, the client preface and an empty SETTINGS sent, its frames
// read (and dropped) on a goroutine of its own so that the server's
// writes never wait for it.
type h2Conn struct {
	t    *testing.T
	conn *tls.Conn
	fr   *http2.Framer
	mu   sync.Mutex // the framer's writes
	// closed is closed once the server closed the connection (its
	// reads end).
	closed chan struct{}
}

func dialH2(t *testing.T, ts *testServer) *h2Conn {
	t.Helper()
	cfg := ts.tlsCfg.Clone()
	cfg.NextProtos = []string{"h2"}
	conn, err := tls.Dial("tcp", ts.addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("negotiated %q, want h2", p)
	}
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	c := &h2Conn{t: t, conn: conn, fr: http2.NewFramer(conn, conn), closed: make(chan struct{})}
	if err := c.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	// The server's SETTINGS acknowledged before anything else is sent,
	// so that the acknowledgement never comes between a HEADERS frame
	// and its CONTINUATION.
	rf := http2.NewFramer(nil, conn)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		f, err := rf.ReadFrame()
		if err != nil {
			t.Fatalf("reading the server's SETTINGS: %v", err)
		}
		if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
			if err := c.fr.WriteSettingsAck(); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	conn.SetReadDeadline(time.Time{})
	go func() {
		defer close(c.closed)
		for {
			f, err := rf.ReadFrame()
			if err != nil {
				return
			}
			if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
				c.mu.Lock()
				c.fr.WriteSettingsAck()
				c.mu.Unlock()
			}
		}
	}()
	return c
}

// get opens stream id with a GET of path, its headers and its end sent.
func (c *h2Conn) get(id uint32, path string) { c.send(id, path, true) }

// send opens stream id with a GET of path and the headers extra (pairs of
// a name and a value), and ends the stream (no body) when end.
func (c *h2Conn) send(id uint32, path string, end bool, extra ...string) {
	c.t.Helper()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	fields := []string{":method", "GET", ":scheme", "https", ":authority", "127.0.0.1", ":path", path}
	fields = append(fields, extra...)
	for i := 0; i+1 < len(fields); i += 2 {
		enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndStream: end, EndHeaders: true}); err != nil {
		c.t.Fatal(err)
	}
}

// TestHTTP2StreamsPerConnectionBounded: one HTTP/2 connection runs at
// most MaxConcurrentStreams requests at once, however many streams its
// client opens, so that --max-connections bounds the requests in flight
// (and what they hold: a cached archive's file, an origin's connection)
// over HTTP/2 as over HTTP/1.1, within a small multiple. Net/http's
// default let one connection run 250 handlers at once.
func TestHTTP2StreamsPerConnectionBounded(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	running, most := 0, 0
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		defer func() { mu.Lock(); running--; mu.Unlock() }()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	ts := startServer(t, h, stallBounds(), true, nil)
	defer close(release)
	c := dialH2(t, ts)
	const streams = 4 * MaxConcurrentStreams
	for i := range streams {
		c.get(uint32(2*i+1), "/held/"+strconv.Itoa(i))
	}
	// Wait for the handlers to start: until as many as a connection
	// may run are, then a while for any beyond them.
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := running
		mu.Unlock()
		if n >= MaxConcurrentStreams || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	got := most
	mu.Unlock()
	if got > MaxConcurrentStreams {
		t.Fatalf("one HTTP/2 connection ran %d requests at once, want at most %d", got, MaxConcurrentStreams)
	}
	if got < MaxConcurrentStreams {
		t.Fatalf("one HTTP/2 connection ran %d requests at once, want %d (the bound, not fewer)", got, MaxConcurrentStreams)
	}
}

// TestHTTP2BodyDeclaredEmptyNeverEnded: over HTTP/2 a GET whose headers
// say content-length: 0 (or a content-length that is no number, which
// net/http reads as 0) and whose stream its client never ends has a body
// that reads nothing and never ends. It gets BodyTimeout to end, as a
// body declared longer does, where bodyDeadline took it for a request
// without a body and left it alone: the mirror reads a GET's body to its
// end before any door runs, so the request, its stream and its
// connection (which an open stream keeps from its idle timeout) were held
// for good.
func TestHTTP2BodyDeclaredEmptyNeverEnded(t *testing.T) {
	t.Parallel()
	type read struct {
		err error
		d   time.Duration
	}
	done := make(chan read, 4)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		_, err := io.Copy(io.Discard, r.Body)
		done <- read{err, time.Since(start)}
	})
	b := stallBounds()
	ts := startServer(t, h, b, true, nil)
	c := dialH2(t, ts)
	for i, cl := range []string{"0", "none"} {
		c.send(uint32(2*i+1), "/index.json", false, "content-length", cl)
		select {
		case got := <-done:
			if got.err == nil {
				t.Errorf("content-length %s, stream never ended: the body read ended without error after %v", cl, got.d)
			} else if got.d > b.body+5*time.Second {
				t.Errorf("content-length %s: the body read failed after %v, want about %v", cl, got.d, b.body)
			}
		case <-time.After(b.body + 10*time.Second):
			t.Fatalf("content-length %s, stream never ended: the body read still waits after %v, want it failed after %v", cl, b.body+10*time.Second, b.body)
		}
	}
}

// TestHTTP2FirstRequestWithinHeaderBound: a connection's first request
// must reach its handler within HeaderTimeout of its TLS handshake's end
// (the handshake has as long) over HTTP/2 as over HTTP/1.1. An HTTP/2
// client that sent its preface and SETTINGS and then nothing, or the
// start of a header block and never its end, held its connection (and
// a --max-connections slot) for IdleTimeout (2 minutes), where an
// HTTP/1.1 client that sends no request is cut off after HeaderTimeout.
func TestHTTP2FirstRequestWithinHeaderBound(t *testing.T) {
	t.Parallel()
	b := stallBounds() // header 1 s, idle 1 minute
	ts := startServer(t, http.NotFoundHandler(), b, true, nil)
	for _, tc := range []struct {
		name string
		send func(c *h2Conn)
	}{
		{"no request", func(*h2Conn) {}},
		{"a header block never ended", func(c *h2Conn) {
			c.mu.Lock()
			defer c.mu.Unlock()
			var block bytes.Buffer
			hpack.NewEncoder(&block).WriteField(hpack.HeaderField{Name: ":method", Value: "GET"})
			if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		c := dialH2(t, ts)
		start := time.Now()
		tc.send(c)
		select {
		case <-c.closed:
			if d := time.Since(start); d > 2*b.header+3*time.Second {
				t.Errorf("%s: the connection was closed after %v, want within %v", tc.name, d, 2*b.header)
			}
		case <-time.After(2*b.header + 10*time.Second):
			t.Errorf("%s: the connection is still open after %v, want it closed within %v", tc.name, 2*b.header+10*time.Second, 2*b.header)
		}
	}
}
