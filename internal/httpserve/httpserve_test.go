package httpserve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serve runs newServer(h) with short bounds on a loopback listener.
func serve(t *testing.T, h http.Handler) (addr string, b bounds) {
	t.Helper()
	// stall > body, as in New, by enough for a loaded machine: the
	// answer to a request whose declared body never comes is written
	// when the body's deadline ends the server's wait for it, under the
	// write deadline armed as the handler returned (it failed, the
	// answer lost, with 0.5 s between them on a busy CI machine).
	b = bounds{header: time.Second, body: time.Second, idle: time.Second, stall: 4 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(h, nil, b)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), b
}

// closedWithin reads c to its end, failing unless the server closes it
// within d; it returns what was read.
func closedWithin(t *testing.T, c net.Conn, d time.Duration) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	got, err := io.ReadAll(c)
	// A server that closes a connection whose client is still sending
	// (a drip the server has not read) resets it: closed, as an EOF is.
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the connection is still open after %v (read %q): %v", d, got, err)
	}
	return string(got)
}

// TestBodyNeverSent: a request that declares a body and sends none (or
// drips it) is answered and its connection closed once BodyTimeout has
// passed; with Go's server alone it was never answered nor closed.
func TestBodyNeverSent(t *testing.T) {
	addr, b := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "answer") }))
	for _, drip := range []bool{false, true} {
		t.Run(fmt.Sprintf("drip=%v", drip), func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fmt.Fprint(c, "GET /x HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
			if drip {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				go func() {
					for ctx.Err() == nil {
						if _, err := c.Write([]byte("a")); err != nil {
							return
						}
						time.Sleep(100 * time.Millisecond)
					}
				}()
			}
			got := closedWithin(t, c, b.body+5*time.Second)
			if !strings.Contains(got, "answer") {
				t.Errorf("no answer before the close: %q", got)
			}
		})
	}
}

// TestIdleConnectionClosed: a kept-alive connection that sends nothing
// more is closed after the idle bound.
func TestIdleConnectionClosed(t *testing.T) {
	addr, b := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "answer") }))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	closedWithin(t, c, b.idle+5*time.Second)
}

// TestSlowBodyRead: a handler reading a body that stops arriving gets an
// error once BodyTimeout has passed, not a read that never ends.
func TestSlowBodyRead(t *testing.T) {
	readErr := make(chan error, 1)
	addr, b := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		readErr <- err
		http.Error(w, "bad body", http.StatusBadRequest)
	}))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprint(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
	select {
	case err := <-readErr:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("the body's read ended with %v, want a timeout", err)
		}
	case <-time.After(b.body + 5*time.Second):
		t.Fatal("the body's read did not end")
	}
}

// TestLongHandlerAfterBody: once its body is read to the end, a handler
// may run and answer for longer than BodyTimeout (an import through the
// admin socket) without its context being cancelled.
func TestLongHandlerAfterBody(t *testing.T) {
	const runs = 2 * time.Second // longer than serve's body bound
	addr, _ := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case <-r.Context().Done():
			http.Error(w, "cancelled", http.StatusServiceUnavailable)
		case <-time.After(runs):
			fmt.Fprintf(w, "done %s", body)
		}
	}))
	resp, err := http.Post("http://"+addr+"/", "application/json", strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(got) != `done {"a":1}` {
		t.Fatalf("%d %q", resp.StatusCode, got)
	}
	// And so may one whose request has no body.
	addr2, _ := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			http.Error(w, "cancelled", http.StatusServiceUnavailable)
		case <-time.After(runs):
			io.WriteString(w, "done")
		}
	}))
	resp2, err := http.Get("http://" + addr2 + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	if resp2.StatusCode != http.StatusOK {
		t.Fatalf("a request without a body: %d", resp2.StatusCode)
	}
}
