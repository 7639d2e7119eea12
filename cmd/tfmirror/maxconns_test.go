package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// A connection beyond --max-connections is not refused and not answered:
// it waits, unaccepted, until one of those open closes, and is then served.
// The two gauges say how many are open and how many may be.
func TestMaxConnectionsHoldsTheNextUntilOneCloses(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{})
	tm := startMirror(t, origin, t.TempDir(), nil, "--insecure-http", "--max-connections", "2")
	addr := strings.TrimSuffix(strings.TrimPrefix(tm.url, "http://"), "/")
	reg := tm.m.registry

	if got := metric(t, reg, "tfmirror_http_connections_limit"); got != 2 {
		t.Fatalf("tfmirror_http_connections_limit = %v, want 2", got)
	}
	ask, dial := healthzAsker(t, addr)
	first, second := dial(), dial()
	for _, c := range []net.Conn{first, second} {
		if status, err := ask(c, 30*time.Second); err != nil || status != "200 OK" {
			t.Fatalf("a connection within the limit: %q, %v", status, err)
		}
	}
	if got := metric(t, reg, "tfmirror_http_connections"); got != 2 {
		t.Fatalf("tfmirror_http_connections = %v with two kept-alive connections, want 2", got)
	}

	// The third connects (the system's listen queue takes it) but is
	// not accepted, so its request is not answered.
	third := dial()
	if status, err := ask(third, 500*time.Millisecond); err == nil {
		t.Fatalf("a connection beyond --max-connections 2 was answered %q", status)
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("a connection beyond the limit failed with %v, want it left waiting", err)
	}
	if got := metric(t, reg, "tfmirror_http_connections"); got != 2 {
		t.Fatalf("tfmirror_http_connections = %v with one waiting beyond the limit, want 2", got)
	}

	// One closed, the waiting one is accepted and its request (sent
	// already) answered.
	first.Close()
	third.SetDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(third), nil)
	if err != nil {
		t.Fatalf("the waiting connection once another closed: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the waiting connection was answered %s", resp.Status)
	}
	deadline := time.Now().Add(30 * time.Second)
	for metric(t, reg, "tfmirror_http_connections") != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("tfmirror_http_connections = %v after one closed and one was accepted, want 2", metric(t, reg, "tfmirror_http_connections"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMaxConnectionsMustBePositive(t *testing.T) {
	for _, v := range []string{"0", "-1"} {
		_, err := parseServeFlags([]string{"--max-connections", v}, func(string) (string, bool) { return "", false }, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--max-connections must be positive") {
			t.Errorf("--max-connections %s: %v, want it refused as not positive", v, err)
		}
	}
}

// At --max-connections the mirror's port accepts no probe either: the
// metrics listener answers /healthz besides /metrics, so that a liveness
// probe there does not restart a mirror that is only busy.
func TestHealthzOnTheMetricsListenerAtTheConnectionLimit(t *testing.T) {
	metricsAddr := freeLoopbackAddr(t)
	origin := newOrigin(t, fakeorigin.Options{})
	tm := startMirror(t, origin, t.TempDir(), nil, "--insecure-http", "--max-connections", "1", "--metrics-listen", metricsAddr)
	addr := strings.TrimSuffix(strings.TrimPrefix(tm.url, "http://"), "/")
	held, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	held.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := held.Write([]byte("GET /healthz HTTP/1.1\r\nHost: " + addr + "\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(held), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // kept alive: the one connection the port takes

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err = client.Get("http://" + metricsAddr + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz on the metrics listener: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"ok"`) {
		t.Fatalf("GET /healthz on the metrics listener with the port at its limit: %s %s, want 200 ok", resp.Status, body)
	}
}

// The metrics listener holds at most metricsMaxConnections connections
// too: a flood of connections there, kept alive or never sending a
// request, took as many file descriptors as it opened, which the cache's
// files and the origins' connections need, --max-connections bounding
// the mirror's port alone. One beyond them waits, unaccepted, as on the
// mirror's port, and is served once one closes.
func TestMetricsListenerConnectionsBounded(t *testing.T) {
	metricsAddr := freeLoopbackAddr(t)
	origin := newOrigin(t, fakeorigin.Options{})
	startMirror(t, origin, t.TempDir(), nil, "--insecure-http", "--metrics-listen", metricsAddr)
	ask, dial := healthzAsker(t, metricsAddr)
	held := make([]net.Conn, metricsMaxConnections)
	for i := range held {
		held[i] = dial()
		if status, err := ask(held[i], 30*time.Second); err != nil || status != "200 OK" {
			t.Fatalf("connection %d of the metrics listener's %d: %q, %v", i+1, metricsMaxConnections, status, err)
		}
	}
	extra := dial()
	if status, err := ask(extra, 500*time.Millisecond); err == nil {
		t.Fatalf("a connection beyond the metrics listener's %d was answered %q", metricsMaxConnections, status)
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("a connection beyond the metrics listener's limit failed with %v, want it left waiting", err)
	}
	held[0].Close()
	extra.SetDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(extra), nil)
	if err != nil {
		t.Fatalf("the waiting connection once another closed: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the waiting connection was answered %s", resp.Status)
	}
}

// healthzAsker returns ask, which sends a request for /healthz on c and
// reads the answer's status line within d, and dial, which opens a
// connection to addr closed when the test ends.
func healthzAsker(t *testing.T, addr string) (ask func(c net.Conn, d time.Duration) (string, error), dial func() net.Conn) {
	ask = func(c net.Conn, d time.Duration) (string, error) {
		c.SetDeadline(time.Now().Add(d))
		if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: " + addr + "\r\n\r\n")); err != nil {
			return "", err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return "", err
		}
		resp.Body.Close()
		return resp.Status, nil
	}
	dial = func() net.Conn {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("connecting: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	return ask, dial
}
