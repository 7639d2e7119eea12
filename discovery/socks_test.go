package discovery

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/socks5test"
)

// TestSOCKSRefusalIsTheProxys: a SOCKS5 upstream proxy that refuses the
// mirror's user and password, that takes none of the authentication
// methods the mirror offers, or whose rules refuse the host ("connection
// not allowed by ruleset") fails the request with a *ProxyError, as an
// HTTP proxy's 407 and 403 do: the operator's to fix, not an outage, so
// not retried and not counted toward the origin's circuit breaker, and
// said in words naming the proxy's settings, never its address or
// credentials, with a log line at error level that says so, and
// observed with the outcome "proxy". A SOCKS5 proxy that could not reach
// the host (host unreachable) is an origin failure like an HTTP proxy's
// 502: retried, counted and observed as "error". The same proxy with the
// right credentials carries the request.
func TestSOCKSRefusalIsTheProxys(t *testing.T) {
	s := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, discoveryDoc("/v1/providers/"))
	}))
	for _, tc := range []struct {
		name       string
		user, pass string // the proxy's URL's
		reply      byte   // the proxy's answer to the connection request
		wantWords  string // "" for a request that succeeds
		wantTries  int
		wantOpen   bool
		wantLogged bool
		outcome    string
	}{
		{name: "right credentials", user: "mirror", pass: "s3cret-proxy-pass", wantTries: 1},
		{name: "wrong password", user: "mirror", pass: "s3cret-wrong-pass", wantWords: "credentials", wantTries: 1, wantLogged: true, outcome: "proxy"},
		{name: "no credentials", wantWords: "credentials", wantTries: 1, wantLogged: true, outcome: "proxy"},
		{name: "ruleset", user: "mirror", pass: "s3cret-proxy-pass", reply: socks5test.NotAllowed, wantWords: "policy", wantTries: 1, wantLogged: true, outcome: "proxy"},
		{name: "host unreachable", user: "mirror", pass: "s3cret-proxy-pass", reply: socks5test.HostUnreachable, wantWords: "host unreachable", wantTries: 3, wantOpen: true, outcome: "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxySrv := socks5test.Start(t, socks5test.Options{User: "mirror", Pass: "s3cret-proxy-pass", Reply: tc.reply})
			proxyURL := &url.URL{Scheme: "socks5", Host: proxySrv.Addr}
			if tc.user != "" {
				proxyURL.User = url.UserPassword(tc.user, tc.pass)
			}
			var logs logbuf.Buffer
			c, obs := retriedProxyClient(t, s, proxyURL, 3, &logs)

			_, err := c.Discover(context.Background(), s.host)
			if tc.wantWords == "" {
				if err != nil {
					t.Fatalf("through the SOCKS5 proxy with its credentials: %v", err)
				}
				if got := proxySrv.Targets(); len(got) != 1 || got[0] != string(s.host) {
					t.Fatalf("the proxy was asked for %q, want [%s]", got, s.host)
				}
				return
			}
			var pe *ProxyError
			if !errors.As(err, &pe) || !errors.Is(err, ErrProxyRefused) {
				t.Fatalf("err = %v (%T), want a *ProxyError", err, err)
			}
			wantOriginError(t, err, OpDiscovery, 0)
			for _, want := range []string{"upstream proxy", "upstream_proxy", "HTTPS_PROXY", "SOCKS5", tc.wantWords, string(s.host)} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			logged := logs.String()
			for _, secret := range []string{"s3cret", "mirror:", proxySrv.Addr} {
				if strings.Contains(err.Error(), secret) || strings.Contains(logged, secret) {
					t.Errorf("error %q or log names %q:\n%s", err, secret, logged)
				}
			}
			if got := proxySrv.Handshakes(); got != tc.wantTries {
				t.Errorf("the proxy was asked %d times, want %d", got, tc.wantTries)
			}
			if open := c.Circuit(string(s.host)).State == "open"; open != tc.wantOpen {
				t.Errorf("circuit open = %v after the proxy's refusal, want %v", open, tc.wantOpen)
			}
			if got := strings.Contains(logged, "level=ERROR") && strings.Contains(logged, "upstream proxy refused"); got != tc.wantLogged {
				t.Errorf("logged at error level that the upstream proxy refused: %v, want %v; log:\n%s", got, tc.wantLogged, logged)
			}
			if got := obs.seen(); len(got) != 1 || got[0] != tc.outcome {
				t.Errorf("observed outcomes %q, want [%s]", got, tc.outcome)
			}
		})
	}
}

// TestSOCKSProtocolBreakIsTheProxys: a SOCKS5 upstream proxy that breaks
// the protocol (answers its greeting with what is not SOCKS5, or closes
// the connection after it) fails the request with a *ProxyError that
// names the proxy by its settings, never its address, and says it broke
// the protocol: the proxy's failure, not the origin's. It is retried, as
// a connection failure is, but counts nothing toward the origin's
// circuit breaker, which stays closed however many requests fail so, and
// it is observed with the outcome "proxy", not "error".
func TestSOCKSProtocolBreakIsTheProxys(t *testing.T) {
	s := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, discoveryDoc("/v1/providers/"))
	}))
	for _, how := range []string{socks5test.Garbage, socks5test.CloseAfterGreeting} {
		t.Run(how, func(t *testing.T) {
			proxySrv := socks5test.Start(t, socks5test.Options{Break: how})
			c, obs := retriedProxyClient(t, s, &url.URL{Scheme: "socks5", Host: proxySrv.Addr}, 3, nil)
			// Three requests of three attempts each, three times the
			// breaker's threshold.
			for i := range 3 {
				_, err := c.Discover(context.Background(), s.host)
				var pe *ProxyError
				if !errors.As(err, &pe) {
					t.Errorf("request %d: err = %v (%T), want a *ProxyError", i+1, err, err)
				}
				for _, want := range []string{"upstream proxy", "upstream_proxy", "HTTPS_PROXY", "SOCKS5 protocol", string(s.host)} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
				if strings.Contains(err.Error(), proxySrv.Addr) {
					t.Errorf("error %q names the proxy's address", err)
				}
				if c := c.Circuit(string(s.host)); c.State != "closed" || c.Failures != 0 {
					t.Fatalf("after request %d the origin's circuit is %+v, want closed with no failure counted", i+1, c)
				}
			}
			if got := proxySrv.Handshakes(); got != 9 {
				t.Errorf("the proxy was asked %d times, want 9 (3 requests of 3 attempts)", got)
			}
			if got := obs.seen(); len(got) != 3 || got[0] != "proxy" || got[1] != "proxy" || got[2] != "proxy" {
				t.Errorf("observed outcomes %q, want 3 of proxy", got)
			}
		})
	}
}

// stallingSOCKS is a SOCKS5 proxy on loopback that goes as far as stage
// in the handshake and then answers nothing more: "greeting" answers
// nothing at all, "credentials" asks for a user and password and does
// not answer them, "connect" asks for none and does not answer the
// connection request (as a proxy waiting for a host that does not
// answer). How each connection ended is told on ends; the proxy closes
// each stallProxyLife after it was opened, and at the test's end.
func stallingSOCKS(t *testing.T, stage string) (addr string, ends <-chan stallEnd) {
	return stallingProxy(t, func(c net.Conn) bool {
		var hdr [2]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return false
		}
		if _, err := io.ReadFull(c, make([]byte, hdr[1])); err != nil {
			return false
		}
		switch stage {
		case "credentials":
			c.Write([]byte{5, 2})
			if _, err := c.Read(make([]byte, 512)); err != nil {
				return false
			}
		case "connect":
			c.Write([]byte{5, 0})
			if _, err := c.Read(make([]byte, 512)); err != nil {
				return false
			}
		}
		return true
	})
}

// stallEnd is how a test proxy's connection ended: whether the proxy
// got as far in the handshake as it stalls at (stalled), and whether the
// mirror then closed the connection (closed), rather than leaving it
// open until the proxy's own end of it.
type stallEnd struct{ stalled, closed bool }

// stallProxyLife is how long a stalling test proxy keeps a connection
// open, waiting for the mirror to close it: longer than any test waits.
const stallProxyLife = time.Minute

// stallingProxy serves connections on loopback with handshake, which
// reads and answers the mirror until where the proxy stalls and reports
// whether it got there; it then answers nothing, until the mirror
// closes the connection or stallProxyLife has passed. How each
// connection ended is told on ends.
func stallingProxy(t *testing.T, handshake func(net.Conn) bool) (addr string, ends <-chan stallEnd) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endc := make(chan stallEnd, 16)
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	serve := func(c net.Conn) {
		defer c.Close()
		c.SetDeadline(time.Now().Add(stallProxyLife))
		if !handshake(c) {
			endc <- stallEnd{}
			return
		}
		for {
			if _, err := c.Read(make([]byte, 512)); err != nil {
				endc <- stallEnd{stalled: true, closed: !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, net.ErrClosed)}
				return
			}
		}
	}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Go(func() { serve(c) })
		}
	})
	return ln.Addr().String(), endc
}

// stallRequestTimeout is the request timeout of the tests of a proxy's
// stalled handshake, and stallBackstop how long such a test waits at
// most for what the bound of the handshake ends: both far above the
// bound (tryBounds), so that only a bound that does not work reaches
// them, not a machine slowed by load.
const (
	stallRequestTimeout = 15 * time.Second
	stallBackstop       = 10 * time.Second
)

// tryBounds runs try with the bound of the proxy's handshake, longer
// each time, for as long as try reports that the mirror did not get as
// far in the handshake as the test needs before that bound had passed:
// a machine too loaded for a loopback round trip or two to fit in it,
// on which what the test is about did not happen. last is the last
// bound's try (the third, 16 times the first), which must not report
// so.
func tryBounds(t *testing.T, first time.Duration, try func(bound time.Duration, last bool) (again bool)) {
	t.Helper()
	const tries = 3
	for i, bound := 1, first; ; i, bound = i+1, 4*bound {
		if last := i == tries; !try(bound, last) || last {
			return
		}
		t.Logf("the handshake did not get far enough within %s (a loaded machine): again with %s", bound, 4*bound)
	}
}

// discoverStalled is c.Discover of host through a proxy that stalls,
// whose connections' ends are told on ends: how long it took, how the
// proxy's connection ended, which it waits for stallBackstop at most once
// the request has ended, and its error.
func discoverStalled(t *testing.T, c *Client, host svchost.Hostname, ends <-chan stallEnd) (time.Duration, stallEnd, error) {
	t.Helper()
	start := time.Now()
	_, err := c.Discover(context.Background(), host)
	took := time.Since(start)
	select {
	case end := <-ends:
		return took, end, err
	case <-time.After(stallBackstop):
		t.Fatalf("the proxy's connection was still open %s after the request ended, after %s, with %v", stallBackstop, took, err)
		return 0, stallEnd{}, nil
	}
}

// stalledBounded fails t unless err, of a request that took took
// through a proxy whose connection ended so, is the bound's, whose
// words it says: the proxy's connection closed by the mirror, the
// request failed with a *proxyStall of the bound, the proxy asked for
// the host or not (hostAsked), after the bound, not sooner, and before
// stallBackstop.
func stalledBounded(t *testing.T, err error, took time.Duration, end stallEnd, bound time.Duration, hostAsked bool) {
	t.Helper()
	if !end.closed {
		t.Fatalf("the mirror did not close the proxy's connection (the bound is %s); the request ended after %s with %v", bound, took, err)
	}
	if err == nil || took < bound || took >= stallBackstop {
		t.Fatalf("the request ended after %s with %v, want an error after the bound (%s)", took, err, bound)
	}
	var stall *proxyStall
	if !errors.As(err, &stall) || stall.limit != bound || stall.hostAsked != hostAsked {
		t.Fatalf("err = %v (%T), want the bound's (%s), the host asked %v", err, err, bound, hostAsked)
	}
}

// goroutines are the stacks of the goroutines running now, by id.
func goroutines() map[string]string {
	buf := make([]byte, 4<<20)
	out := map[string]string{}
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		id, _, _ := strings.Cut(strings.TrimPrefix(g, "goroutine "), " ")
		out[id] = g
	}
	return out
}

// dialGoroutines are the stacks of the goroutines running now, not in
// before, that dial a connection for net/http.
func dialGoroutines(before map[string]string) []string {
	var out []string
	for id, g := range goroutines() {
		if _, old := before[id]; !old && (strings.Contains(g, "(*Transport).dialConnFor") || strings.Contains(g, "(*socksDialer)")) {
			out = append(out, g)
		}
	}
	return out
}

// TestSOCKSHandshakeIsBounded: a SOCKS5 upstream proxy that accepts the
// connection and then answers nothing, at any step of its handshake, has
// its connection closed by the mirror once the handshake's bound has
// passed, and the request fails then, with the bound's timeout, not
// sooner, and no goroutine is left dialling: net/http runs the handshake
// on a context without a deadline that no request's end cancels, which
// held the connection and its goroutine for as long as the proxy kept
// it open. A proxy that answers neither the greeting nor the mirror's
// credentials does not answer, as one not reached (outcome "proxy",
// counted toward the origin's circuit breaker as the network down, the
// log saying so at error level, the error a timeout); one that was asked
// for the host and does not answer is waiting for the host, whose
// timeout it is (outcome "timeout"), as a dial's is. No error names the
// proxy's address.
func TestSOCKSHandshakeIsBounded(t *testing.T) {
	s := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, discoveryDoc("/v1/providers/"))
	}))
	for _, tc := range []struct {
		stage     string
		hostAsked bool
	}{
		{stage: "greeting"},
		{stage: "credentials"},
		{stage: "connect", hostAsked: true},
	} {
		t.Run(tc.stage, func(t *testing.T) {
			checkStalledHandshake(t, s, stalledProxy{
				kind:   "SOCKS5",
				scheme: "socks5",
				start: func(t *testing.T) (string, <-chan stallEnd) {
					return stallingSOCKS(t, tc.stage)
				},
				hostAsked: tc.hostAsked,
			})
		})
	}
}

// noDialsLeft fails t when goroutines dialling for net/http, not in
// before, are still running stallBackstop from now.
func noDialsLeft(t *testing.T, before map[string]string) {
	t.Helper()
	deadline := time.Now().Add(stallBackstop)
	for len(dialGoroutines(before)) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if left := dialGoroutines(before); len(left) > 0 {
		t.Errorf("%d dials outlive the request:\n%s", len(left), strings.Join(left, "\n\n"))
	}
}

// TestSOCKSTunnelOutlivesTheHandshakeBound: through a SOCKS5 upstream
// proxy that works, a download that lasts several times the bound of
// the proxy's handshake completes, over HTTP/1.1 and HTTP/2 with the
// origin: the bound is lifted once the connection is given to the
// request. The connection, idle longer than the bound, carries the next
// request (the proxy is asked once).
func TestSOCKSTunnelOutlivesTheHandshakeBound(t *testing.T) {
	for _, proto := range tunnelProtos {
		t.Run(proto, func(t *testing.T) { socksTunnel.download(t, proto) })
	}
}

// socksTunnel is a SOCKS5 upstream proxy that works.
var socksTunnel = tunnelProxy{
	kind:      "SOCKS5",
	handshake: "the SOCKS5 handshake",
	start: func(t *testing.T) (*url.URL, func() int) {
		proxySrv := socks5test.Start(t, socks5test.Options{})
		return &url.URL{Scheme: "socks5", Host: proxySrv.Addr}, proxySrv.Handshakes
	},
}

// TestSOCKSConnectionOfARequestGoneIsKept: a connection through a
// SOCKS5 upstream proxy dialled for a request that went away before it
// was opened goes to the idle connections as any other, its handshake's
// bound lifted, and carries a request made after the bound has passed,
// over HTTP/1.1 and HTTP/2 with the origin (the proxy is asked once).
// Left to die of the bound, it would have been dialled again, and over
// HTTP/2 handed to that request dead, failing it ("client conn could
// not be established").
func TestSOCKSConnectionOfARequestGoneIsKept(t *testing.T) {
	for _, proto := range tunnelProtos {
		t.Run(proto, func(t *testing.T) { socksTunnel.requestGone(t, proto) })
	}
}

// goneDialer is a Config.DialContext whose first dial starts once the
// request it is for has gone away (request), and which tells of a read
// or a write of its connections cut by their deadline.
type goneDialer struct {
	once   sync.Once
	cancel context.CancelFunc // the request's
	gone   chan struct{}      // closed once the request has returned
	cut    atomic.Bool
}

func (g *goneDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	g.once.Do(func() {
		g.cancel()
		<-g.gone
	})
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &cutConn{Conn: conn, cut: &g.cut}, nil
}

// request makes a request with fetch, on a context that its first dial
// cancels, and returns once that dial, started after fetch returned, is
// done: whether a read or a write of its connection was cut by its
// deadline, the handshake's bound (a machine too loaded for the
// handshake to fit in it).
func (g *goneDialer) request(t *testing.T, fetch func(context.Context) error) (cut bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g.cancel, g.gone = cancel, make(chan struct{})
	released := false
	defer func() {
		if !released {
			close(g.gone)
		}
	}()
	before := goroutines()
	if err := fetch(ctx); err == nil {
		t.Fatal("the request that went away succeeded")
	}
	if len(dialGoroutines(before)) == 0 {
		t.Fatal("no dial waits for the request gone")
	}
	released = true
	close(g.gone)
	deadline := time.Now().Add(stallBackstop)
	for len(dialGoroutines(before)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the dial for the request gone did not end in %s", stallBackstop)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return g.cut.Load()
}

// cutConn is a connection that tells on cut of a read or a write of it
// that failed for its deadline.
type cutConn struct {
	net.Conn
	cut *atomic.Bool
}

func (c *cutConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.saw(err)
	return n, err
}

func (c *cutConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.saw(err)
	return n, err
}

func (c *cutConn) saw(err error) {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.cut.Store(true)
	}
}
