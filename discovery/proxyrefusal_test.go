package discovery

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
)

// TestProxyRefusalNamesTheProxy: an upstream proxy that answers a CONNECT
// with anything but 200 (407 for credentials it refuses, 403 for a host
// its policy refuses, 502 for an origin it cannot reach) fails the request
// with a *ProxyError that says the proxy refused, with its status, and
// names the settings that choose the proxy: not net/http's bare status
// text ("Forbidden"), which reads as the origin's answer. It never names
// the proxy's address or its credentials. A 407 or a 403 is the
// operator's to fix, not an outage: it is not retried and does not open
// the origin's circuit breaker, it is logged at error level, and the
// origin request is observed with the outcome "proxy", not "error"; any
// other refusal is a failure like the origin's own 502.
func TestProxyRefusalNamesTheProxy(t *testing.T) {
	for _, tc := range []struct {
		status      int
		wantWords   string
		wantTries   int32
		wantOpen    bool
		wantOutcome string
	}{
		{http.StatusProxyAuthRequired, "credentials", 1, false, "proxy"},
		{http.StatusForbidden, "policy", 1, false, "proxy"},
		{http.StatusBadGateway, "502", 3, true, "error"},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			var connects atomic.Int32
			proxySrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				connects.Add(1)
				http.Error(w, "refused by the test proxy", tc.status)
			}))
			t.Cleanup(proxySrv.Close)
			proxyURL, _ := url.Parse(proxySrv.URL)
			proxyURL.User = url.UserPassword("mirror", "s3cret-proxy-pass")
			s := newTestServer(t, http.NotFoundHandler())
			var logs bytes.Buffer
			c, obs := retriedProxyClient(t, s, proxyURL, 3, &logs)

			_, err := c.Discover(context.Background(), s.host)
			var pe *ProxyError
			if !errors.As(err, &pe) || !errors.Is(err, ErrProxyRefused) {
				t.Fatalf("err = %v (%T), want a *ProxyError", err, err)
			}
			if pe.StatusCode != tc.status {
				t.Errorf("ProxyError.StatusCode = %d, want %d", pe.StatusCode, tc.status)
			}
			wantOriginError(t, err, OpDiscovery, 0)
			for _, want := range []string{"upstream proxy", "upstream_proxy", "HTTPS_PROXY", tc.wantWords, string(s.host)} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			for _, secret := range []string{"s3cret-proxy-pass", "mirror:", proxyURL.Host} {
				if strings.Contains(err.Error(), secret) || strings.Contains(logs.String(), secret) {
					t.Errorf("error %q or log names %q", err, secret)
				}
			}
			if got := connects.Load(); got != tc.wantTries {
				t.Errorf("the proxy was asked %d times, want %d", got, tc.wantTries)
			}
			if open := c.Circuit(string(s.host)).State == "open"; open != tc.wantOpen {
				t.Errorf("circuit open = %v after the proxy's %d, want %v", open, tc.status, tc.wantOpen)
			}
			if got := obs.seen(); len(got) != 1 || got[0] != tc.wantOutcome {
				t.Errorf("observed outcomes %q, want [%s]", got, tc.wantOutcome)
			}
			// A refusal that is the operator's to fix is logged at error
			// level, by the proxy's settings.
			logged := strings.Contains(logs.String(), "level=ERROR") && strings.Contains(logs.String(), "upstream proxy refused")
			if want := !tc.wantOpen; logged != want {
				t.Errorf("logged at error level that the upstream proxy refused: %v, want %v; log:\n%s", logged, want, logs.String())
			}
		})
	}
}

// deadAddr is a loopback address nothing listens on: a listener's,
// closed.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestUnreachableProxyIsTheProxys: an upstream proxy that cannot be
// reached (nothing listens at its address), HTTP or SOCKS5, fails the
// request with a *ProxyError that says the upstream proxy could not be
// reached, naming its settings, never its address or the credentials of
// its URL: net/http's words ("proxyconnect tcp: dial tcp ADDR: connect:
// connection refused") name the operator's internal address to whoever
// asked. It is the proxy's failure, observed with the outcome "proxy",
// and retried, as a connection failure is; as the network down, it
// counts toward the origin's circuit breaker, which opens and refuses
// the next request at once, unsent. The log says so at error level,
// with net/http's words (the address, for the operator), never the
// credentials.
func TestUnreachableProxyIsTheProxys(t *testing.T) {
	s := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, discoveryDoc("/v1/providers/"))
	}))
	for _, scheme := range []string{"http", "socks5"} {
		t.Run(scheme, func(t *testing.T) {
			addr := deadAddr(t)
			proxyURL := &url.URL{Scheme: scheme, User: url.UserPassword("mirror", "s3cret-proxy-pass"), Host: addr}
			var logs logbuf.Buffer
			c, obs := retriedProxyClient(t, s, proxyURL, 3, &logs)
			// One request of three attempts: the breaker's threshold.
			_, err := c.Discover(context.Background(), s.host)
			var pe *ProxyError
			if !errors.As(err, &pe) || !errors.Is(err, ErrProxyRefused) {
				t.Fatalf("err = %v (%T), want a *ProxyError", err, err)
			}
			wantOriginError(t, err, OpDiscovery, 0)
			for _, want := range []string{"upstream proxy", "upstream_proxy", "HTTPS_PROXY", "could not be reached", "connection refused", string(s.host)} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if c := c.Circuit(string(s.host)); c.State != "open" || c.Failures != 3 {
				t.Errorf("after three attempts the origin's circuit is %+v, want open with 3 failures", c)
			}
			if got := obs.seen(); len(got) != 1 || got[0] != "proxy" {
				t.Errorf("observed outcomes %q, want one proxy", got)
			}
			// The next request is refused at once, unsent, and names
			// neither the proxy's address nor its credentials either.
			_, next := c.Discover(context.Background(), s.host)
			if !errors.Is(next, ErrCircuitOpen) {
				t.Errorf("the next request: err = %v, want ErrCircuitOpen", next)
			}
			for _, err := range []error{err, next} {
				for _, secret := range []string{addr, "s3cret", "mirror:", "proxyconnect"} {
					if err != nil && strings.Contains(err.Error(), secret) {
						t.Errorf("error %q names %q", err, secret)
					}
				}
			}
			logged := logs.String()
			if !strings.Contains(logged, "level=ERROR") || !strings.Contains(logged, "upstream proxy could not be reached") ||
				!strings.Contains(logged, addr) {
				t.Errorf("no error-level log line that the upstream proxy at %s could not be reached:\n%s", addr, logged)
			}
			if strings.Contains(logged, "s3cret") {
				t.Errorf("the log names the proxy's password:\n%s", logged)
			}
		})
	}
}

// connectProxy is an HTTP proxy on loopback that answers each CONNECT
// with answer, calls then (when not nil) with the connection, then
// closes it; with answer "" it closes the connection once it has read
// the request, without an answer. It counts the CONNECTs it read.
func connectProxy(t *testing.T, answer string, then func(net.Conn)) (addr string, connects *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	connects = &atomic.Int32{}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				conn.SetDeadline(time.Now().Add(10 * time.Second))
				req, err := http.ReadRequest(bufio.NewReader(io.LimitReader(conn, 64<<10)))
				if err != nil || req.Method != http.MethodConnect {
					return
				}
				connects.Add(1)
				io.WriteString(conn, answer)
				if then != nil {
					then(conn)
				}
			}()
		}
	}()
	return l.Addr().String(), connects
}

// TestHTTPProxyBreakingCONNECTIsTheProxys: an HTTP upstream proxy that
// answers a CONNECT with what is not an HTTP response, or closes the
// connection without an answer, fails the request with a *ProxyError
// that says the upstream proxy, by its settings, never its address,
// broke the HTTP protocol: the proxy's failure, not the origin's, as a
// SOCKS5 proxy's break of its protocol is. It is retried, but counts
// nothing toward the origin's circuit breaker, and is observed with the
// outcome "proxy". What comes through a tunnel the proxy opened (200)
// is the origin's: an answer there that is not TLS is an origin failure,
// counted by its breaker and observed as "error".
func TestHTTPProxyBreakingCONNECTIsTheProxys(t *testing.T) {
	s := newTestServer(t, http.NotFoundHandler())
	for _, tc := range []struct {
		name, answer string
		wantWords    string
		origins      bool // the failure is the origin's
	}{
		{name: "garbage", answer: "SSH-2.0-OpenSSH_9.6\r\n\r\n", wantWords: "is not an HTTP response"},
		{name: "close", answer: "", wantWords: "closed the connection"},
		{name: "origin garbage", answer: "HTTP/1.1 200 Connection established\r\n\r\nSSH-2.0-OpenSSH_9.6\r\n", origins: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, connects := connectProxy(t, tc.answer, nil)
			c, obs := retriedProxyClient(t, s, &url.URL{Scheme: "http", Host: addr}, 9, nil)
			// Three requests of three attempts each: the breaker's
			// threshold, which opens it on the origin's failures.
			for i := range 3 {
				_, err := c.Discover(context.Background(), s.host)
				if err == nil {
					t.Fatalf("request %d succeeded", i+1)
				}
				var pe *ProxyError
				if isProxys := errors.As(err, &pe); isProxys == tc.origins {
					t.Fatalf("request %d: err = %v (%T), the proxy's: %v, want %v", i+1, err, err, isProxys, !tc.origins)
				}
				if strings.Contains(err.Error(), addr) {
					t.Errorf("error %q names the proxy's address", err)
				}
				if tc.origins {
					continue
				}
				for _, want := range []string{"upstream proxy", "upstream_proxy", "HTTPS_PROXY", "broke the HTTP protocol", tc.wantWords, string(s.host)} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
				if c := c.Circuit(string(s.host)); c.State != "closed" || c.Failures != 0 {
					t.Fatalf("after request %d the origin's circuit is %+v, want closed with no failure counted", i+1, c)
				}
			}
			if got := connects.Load(); got != 9 {
				t.Errorf("the proxy was asked %d times, want 9 (3 requests of 3 attempts)", got)
			}
			want := "proxy"
			if tc.origins {
				want = "error"
				if c := c.Circuit(string(s.host)); c.State != "open" {
					t.Errorf("the origin's circuit is %+v after 9 failures of the origin, want open", c)
				}
			}
			if got := obs.seen(); len(got) != 3 || got[0] != want || got[1] != want || got[2] != want {
				t.Errorf("observed outcomes %q, want 3 of %s", got, want)
			}
		})
	}
}

// TestProxyTunnelFailureNamesNoProxyAddress: a tunnel the upstream proxy
// opened that breaks (the origin, or the proxy on its behalf, resets
// the connection) is the origin's failure, but net/http's words for it
// ("read tcp 127.0.0.1:PORT->PROXY:3128: read: connection reset by
// peer") name the proxy's address, the operator's internal one, to
// whoever asked: the error says what failed without it.
func TestProxyTunnelFailureNamesNoProxyAddress(t *testing.T) {
	s := newTestServer(t, http.NotFoundHandler())
	addr, _ := connectProxy(t, "HTTP/1.1 200 Connection established\r\n\r\n", func(conn net.Conn) {
		// Read the TLS ClientHello, then reset the connection.
		conn.Read(make([]byte, 1))
		conn.(*net.TCPConn).SetLinger(0)
	})
	obs := &discoveryCounter{}
	c := newTestClient(t, s, func(cfg *Config) {
		cfg.Observer = obs
		cfg.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: addr})
		cfg.Retries = 0
	})
	_, err := c.Discover(context.Background(), s.host)
	if err == nil || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("err = %v, want the connection reset", err)
	}
	_, port, _ := net.SplitHostPort(addr)
	if strings.Contains(err.Error(), ":"+port) {
		t.Errorf("error %q names the proxy's address %s", err, addr)
	}
	if errors.As(err, new(*ProxyError)) {
		t.Errorf("err = %v, the proxy's; want the origin's", err)
	}
	if got := obs.seen(); len(got) != 1 || got[0] != "error" {
		t.Errorf("observed outcomes %q, want [error]", got)
	}
}

// retriedProxyClient is a client of s whose requests go through the proxy at
// proxyURL, observed by the counter it returns, each request of three
// attempts, its circuit breaker opening at threshold failures; logging
// to logs at debug level, when not nil.
func retriedProxyClient(t *testing.T, s *testServer, proxyURL *url.URL, threshold int, logs io.Writer) (*Client, *discoveryCounter) {
	t.Helper()
	obs := &discoveryCounter{}
	c := newTestClient(t, s, func(cfg *Config) {
		cfg.Observer = obs
		cfg.Proxy = http.ProxyURL(proxyURL)
		cfg.Retries = 2
		cfg.BreakerThreshold = threshold
		if logs != nil {
			cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
	})
	return c, obs
}
