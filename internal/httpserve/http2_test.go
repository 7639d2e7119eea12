package httpserve

import (
	"bytes"
	"crypto/tls"
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
	c := &h2Conn{t: t, conn: conn, fr: http2.NewFramer(conn, conn)}
	if err := c.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	go func() {
		rf := http2.NewFramer(nil, conn)
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
func (c *h2Conn) get(id uint32, path string) {
	c.t.Helper()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "127.0.0.1"}, {":path", path}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
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
