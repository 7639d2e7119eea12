package httpserve

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/certs"
)

// stallBound is the write stall bound of these tests.
const stallBound = 500 * time.Millisecond

// smallBuffers keeps the kernel's send buffer of each accepted connection
// small, so that a client that does not read stalls the server's writes
// after some tens of KiB rather than megabytes.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(16 << 10)
	}
	return c, err
}

// testServer is a server of newServer on loopback.
type testServer struct {
	srv    *http.Server
	addr   string
	client *http.Client // speaks TLS (and HTTP/2) to a TLS server
	tlsCfg *tls.Config  // a client's, for a TLS server
}

// startServer runs newServer(h) with bounds b on a loopback listener with
// small send buffers; over TLS, offering h2 and http/1.1 as the mirror
// does with --http2, when withTLS. configure may set more of the server
// (ConnState) before it serves.
func startServer(t *testing.T, h http.Handler, b bounds, withTLS bool, configure func(*http.Server)) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{srv: newServer(h, nil, b), addr: ln.Addr().String(), client: &http.Client{}}
	if configure != nil {
		configure(ts.srv)
	}
	var sln net.Listener = smallBuffers{ln}
	if withTLS {
		files, err := certs.Ensure(t.TempDir(), []string{"127.0.0.1"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.LoadX509KeyPair(files.Cert, files.Key)
		if err != nil {
			t.Fatal(err)
		}
		caPEM, err := os.ReadFile(files.CA)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		ts.srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{pair}, NextProtos: []string{"h2", "http/1.1"}}
		sln = tls.NewListener(sln, ts.srv.TLSConfig)
		ts.tlsCfg = &tls.Config{RootCAs: pool, NextProtos: []string{"h2"}}
		ts.client.Transport = &http.Transport{TLSClientConfig: ts.tlsCfg, ForceAttemptHTTP2: true}
	}
	go ts.srv.Serve(sln)
	t.Cleanup(func() {
		ts.client.CloseIdleConnections()
		ts.srv.Close()
	})
	return ts
}

func (ts *testServer) url() string {
	if ts.tlsCfg != nil {
		return "https://" + ts.addr + "/"
	}
	return "http://" + ts.addr + "/"
}

func stallBounds() bounds {
	return bounds{header: time.Second, body: time.Second, idle: time.Minute, stall: stallBound}
}

// writeResult is how a handler's writes ended.
type writeResult struct {
	err         error
	lastWrite   time.Duration // how long the failing write took
	written     int64
	ctxCanceled bool // the request's context was done once the write failed
}

// writeUntilError is a handler that writes 256 KiB pieces (up to 1 GiB)
// until a write fails, as an archive's stream does, and reports how.
func writeUntilError(done chan<- writeResult) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		piece := bytes.Repeat([]byte("z"), 256<<10)
		rc := http.NewResponseController(w)
		var res writeResult
		for res.written < 1<<30 {
			start := time.Now()
			n, err := w.Write(piece)
			if err == nil {
				err = rc.Flush()
			}
			res.written += int64(n)
			if err != nil {
				res.err, res.lastWrite = err, time.Since(start)
				// The server cancels the request's context when it
				// gives up on the client; a front door reads that as
				// the client gone.
				select {
				case <-r.Context().Done():
					res.ctxCanceled = true
				case <-time.After(5 * time.Second):
				}
				break
			}
		}
		done <- res
	}
}

// checkCutOff waits for the handler of writeUntilError and checks that a
// write failed, no sooner than the bound (unless early) and soon after
// it, with the request's context cancelled. Early: the failing write may
// have waited less, for the stalled bytes were another's (over HTTP/2 the
// connection's writes go on after the handler's write has returned).
func checkCutOff(t *testing.T, done <-chan writeResult, b time.Duration, early bool) writeResult {
	t.Helper()
	select {
	case res := <-done:
		if res.err == nil {
			t.Fatalf("the handler wrote %d bytes without an error", res.written)
		}
		if !early && res.lastWrite < b*9/10 || res.lastWrite > b+5*time.Second {
			t.Errorf("the failing write took %v (%v), want about the bound %v", res.lastWrite, res.err, b)
		}
		if !res.ctxCanceled {
			t.Errorf("the request's context is not done after the write failed (%v)", res.err)
		}
		return res
	case <-time.After(b + 20*time.Second):
		t.Fatal("the handler's writes to a client that does not read never failed")
	}
	return writeResult{}
}

// TestStalledReaderCutOff: a client that asks for a large answer and
// never reads it is cut off once a write has waited the stall bound: the
// handler's write fails (a timeout), its request's context is cancelled,
// and the connection is closed. Before, the handler waited in its write
// for good, with its connection and whatever it was reading.
func TestStalledReaderCutOff(t *testing.T) {
	t.Parallel()
	for _, withTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", withTLS), func(t *testing.T) {
			t.Parallel()
			done := make(chan writeResult, 1)
			ts := startServer(t, writeUntilError(done), stallBounds(), withTLS, nil)
			var c net.Conn
			var err error
			if withTLS {
				c, err = tls.Dial("tcp", ts.addr, &tls.Config{RootCAs: ts.tlsCfg.RootCAs, NextProtos: []string{"http/1.1"}})
			} else {
				c, err = net.Dial("tcp", ts.addr)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fmt.Fprint(c, "GET /archive.zip HTTP/1.1\r\nHost: x\r\n\r\n")
			res := checkCutOff(t, done, stallBound, false)
			if !errors.Is(res.err, os.ErrDeadlineExceeded) {
				t.Errorf("the failing write's error is %v, want a write deadline exceeded", res.err)
			}
			// The connection is closed: what the client reads now ends,
			// not with its own timeout.
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = io.Copy(io.Discard, c)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the connection is still open: %v", err)
			}
		})
	}
}

// TestStalledHTTP2StreamCutOff: over HTTP/2, a client that reads its
// connection but not one response (it grants the stream no more flow
// control) has that stream reset once a write has waited the stall
// bound; the connection and its other streams go on.
func TestStalledHTTP2StreamCutOff(t *testing.T) {
	t.Parallel()
	done := make(chan writeResult, 1)
	mux := http.NewServeMux()
	mux.Handle("/archive.zip", writeUntilError(done))
	mux.HandleFunc("/small", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "small") })
	ts := startServer(t, mux, stallBounds(), true, nil)
	resp, err := ts.client.Get(ts.url() + "archive.zip")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("served over %s, want HTTP/2", resp.Proto)
	}
	checkCutOff(t, done, stallBound, false)
	// The stream is reset: reading it now ends in an error.
	if _, err := io.Copy(io.Discard, resp.Body); err == nil {
		t.Error("the stalled stream ended as if complete")
	}
	small, err := ts.client.Get(ts.url() + "small")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(small.Body)
	small.Body.Close()
	if err != nil || string(got) != "small" || small.ProtoMajor != 2 {
		t.Fatalf("another request after the reset: %q, %v over %s", got, err, small.Proto)
	}
}

// pausableConn stops reading its connection while paused, as a client
// that reads nothing more at all (not even HTTP/2's control frames).
type pausableConn struct {
	net.Conn
	paused atomic.Bool
	resume chan struct{}
}

func (c *pausableConn) Read(p []byte) (int, error) {
	if c.paused.Load() {
		<-c.resume
	}
	return c.Conn.Read(p)
}

// TestStalledHTTP2ConnectionClosed: over HTTP/2, a client that stops
// reading its connection altogether has it closed once the server's
// writes to it have made no progress for the stall bound, and the
// handler writing to it sees its write fail. Without HTTP/2's own write
// bound, the stream's deadline alone would not free the handler: the
// stream's reset is a frame that waits behind the stalled writes.
func TestStalledHTTP2ConnectionClosed(t *testing.T) {
	t.Parallel()
	done := make(chan writeResult, 1)
	closed := make(chan struct{})
	ts := startServer(t, writeUntilError(done), stallBounds(), true, func(srv *http.Server) {
		srv.ConnState = func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed {
				close(closed)
			}
		}
	})
	pc := make(chan *pausableConn, 1)
	ts.client.Transport = &http.Transport{
		ForceAttemptHTTP2: true,
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			raw, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			c := &pausableConn{Conn: raw, resume: make(chan struct{})}
			cfg := ts.tlsCfg.Clone()
			cfg.ServerName = "127.0.0.1"
			tc := tls.Client(c, cfg)
			if err := tc.HandshakeContext(ctx); err != nil {
				raw.Close()
				return nil, err
			}
			pc <- c
			return tc, nil
		},
	}
	resp, err := ts.client.Get(ts.url())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("served over %s, want HTTP/2", resp.Proto)
	}
	c := <-pc
	c.paused.Store(true)
	defer close(c.resume)
	checkCutOff(t, done, stallBound, true)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the stalled connection is still open")
	}
}

// TestSlowReaderCompletes: a client that reads slowly but steadily gets
// its whole answer, though the answer takes several times the stall
// bound and is larger than every buffer between the two: the bound is on
// each write's progress, not on the answer. One handler writes its body
// in one write of 1 MiB, the other in flushed pieces.
//
// Its bound is longer than stallBound: a write waits here on a client
// that must be scheduled to read, and on a loaded two-core machine a
// client paused for more than 500 ms was cut off, as it should be. The
// client's pace is slowed to match, so that the answer still takes
// several times the bound.
func TestSlowReaderCompletes(t *testing.T) {
	t.Parallel()
	const bound = 4 * time.Second
	b := stallBounds()
	b.stall = bound
	body := bytes.Repeat([]byte("0123456789abcdef"), 1<<17) // 2 MiB
	for _, oneWrite := range []bool{true, false} {
		t.Run(fmt.Sprintf("oneWrite=%v", oneWrite), func(t *testing.T) {
			t.Parallel()
			werr := make(chan error, 1)
			wrote := make(chan time.Duration, 1) // how long the handler's writes took
			ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", fmt.Sprint(len(body)))
				start := time.Now()
				defer func() { wrote <- time.Since(start) }()
				if oneWrite {
					_, err := w.Write(body)
					werr <- err
					return
				}
				rc := http.NewResponseController(w)
				for rest := body; len(rest) > 0; rest = rest[min(len(rest), 256<<10):] {
					if _, err := w.Write(rest[:min(len(rest), 256<<10)]); err != nil {
						werr <- err
						return
					}
					if err := rc.Flush(); err != nil {
						werr <- err
						return
					}
				}
				werr <- nil
			}), b, false, nil)
			c, err := net.Dial("tcp", ts.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			br := bufio.NewReaderSize(c, 8<<10)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			// 8 KiB every 50 ms: 64 KiB in some 400 ms (a tenth of the
			// bound), 2 MiB in some 13 s (over three times the bound).
			var got bytes.Buffer
			buf := make([]byte, 8<<10)
			c.SetReadDeadline(time.Now().Add(5 * time.Minute))
			for {
				n, err := io.ReadFull(resp.Body, buf)
				got.Write(buf[:n])
				if err == io.EOF || err == io.ErrUnexpectedEOF && got.Len() == len(body) {
					break
				}
				if err != nil {
					t.Fatalf("after %d bytes in %v: %v", got.Len(), time.Since(start), err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if !bytes.Equal(got.Bytes(), body) {
				t.Fatalf("got %d bytes, not the body of %d", got.Len(), len(body))
			}
			if err := <-werr; err != nil {
				t.Fatalf("the handler's write failed: %v", err)
			}
			// The writes waited on the client (the body is larger than
			// the buffers between them) for longer than the bound.
			if d := <-wrote; d < 2*bound {
				t.Fatalf("the handler's writes took %v, not longer than the bound %v: the test proves nothing", d, bound)
			}
		})
	}
}

// TestWaitBetweenWrites: a handler may wait longer than the stall bound
// before its first write, between writes and before it returns (an
// origin's slow download), over HTTP/1.1 and HTTP/2: only a write in
// progress is timed.
func TestWaitBetweenWrites(t *testing.T) {
	t.Parallel()
	const wait = 2 * stallBound
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		time.Sleep(wait)
		io.WriteString(w, "first ")
		rc.Flush()
		time.Sleep(wait)
		io.WriteString(w, "second ") // buffered until the handler returns
		time.Sleep(wait)
		io.WriteString(w, "third")
	})
	for _, withTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", withTLS), func(t *testing.T) {
			t.Parallel()
			ts := startServer(t, h, stallBounds(), withTLS, nil)
			for range 2 { // the second on the kept-alive connection
				resp, err := ts.client.Get(ts.url())
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || string(got) != "first second third" {
					t.Fatalf("%s over %s: %q, %v", resp.Status, resp.Proto, got, err)
				}
				if withTLS && resp.ProtoMajor != 2 {
					t.Fatalf("served over %s, want HTTP/2", resp.Proto)
				}
			}
		})
	}
}

// TestHijackedConnectionHasNoDeadline: a connection its handler hijacks
// carries no write deadline of the bound, then or after the handler
// returns.
func TestHijackedConnectionHasNoDeadline(t *testing.T) {
	t.Parallel()
	werr := make(chan error, 1)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, bw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			werr <- err
			return
		}
		go func() {
			defer c.Close()
			time.Sleep(2 * stallBound)
			bw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nafter")
			werr <- bw.Flush()
		}()
	}), stallBounds(), false, nil)
	resp, err := ts.client.Get(ts.url())
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := <-werr; err != nil {
		t.Fatalf("writing to the hijacked connection: %v", err)
	}
	if string(got) != "after" {
		t.Fatalf("read %q", got)
	}
}

// TestWriteStallRecorder: a ResponseWriter without deadlines (a test's
// recorder) is served as it is.
func TestWriteStallRecorder(t *testing.T) {
	var inner http.ResponseWriter
	h := writeStall(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner = w
		io.WriteString(w, strings.Repeat("x", 3*stallChunk))
	}), time.Second)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if inner != rec || rec.Body.Len() != 3*stallChunk {
		t.Fatalf("the recorder was wrapped (%T) or the body lost (%d bytes)", inner, rec.Body.Len())
	}
}

// deadlineWriter records the write deadlines set on it and the deadline
// in force at each write.
type deadlineWriter struct {
	http.ResponseWriter
	deadline time.Time
	sets     int
	writes   []time.Time // the deadline of each write
	sizes    []int
}

func (w *deadlineWriter) SetWriteDeadline(t time.Time) error {
	w.deadline = t
	w.sets++
	return nil
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, w.deadline)
	w.sizes = append(w.sizes, len(p))
	return len(p), nil
}

func (w *deadlineWriter) FlushError() error {
	w.writes = append(w.writes, w.deadline)
	w.sizes = append(w.sizes, 0)
	return nil
}

// TestWriteStallDeadlines: the deadline is set before each write (a
// large one in pieces of stallChunk), lifted after it, so that none is
// left while the handler waits, and set once more when the handler
// returns, for what the server still writes (over HTTP/1.1 a buffered
// tail, over HTTP/2 the final flush, both of which would otherwise wait
// for the client without end).
func TestWriteStallDeadlines(t *testing.T) {
	dw := &deadlineWriter{ResponseWriter: httptest.NewRecorder()}
	const d = time.Minute
	var between []time.Time // the deadline in force between writes
	h := writeStall(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(make([]byte, 2*stallChunk+1))
		between = append(between, dw.deadline)
		http.NewResponseController(w).Flush()
		between = append(between, dw.deadline)
		w.Write([]byte("tail"))
		between = append(between, dw.deadline)
	}), d)
	start := time.Now()
	h.ServeHTTP(dw, httptest.NewRequest(http.MethodGet, "/", nil))
	if want := []int{stallChunk, stallChunk, 1, 0, 4}; fmt.Sprint(dw.sizes) != fmt.Sprint(want) {
		t.Errorf("writes of %v bytes (0: a flush), want %v", dw.sizes, want)
	}
	for i, dl := range dw.writes {
		if dl.Before(start.Add(d)) || dl.After(time.Now().Add(d)) {
			t.Errorf("write %d had deadline %v, want about now + %v", i, dl, d)
		}
	}
	for i, dl := range between {
		if !dl.IsZero() {
			t.Errorf("a deadline was left set after write %d: %v", i, dl)
		}
	}
	if dw.deadline.Before(start.Add(d)) {
		t.Errorf("after the handler returned the deadline is %v, want one for the server's last writes", dw.deadline)
	}
}
