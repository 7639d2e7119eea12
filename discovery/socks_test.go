package discovery

import (
	"bytes"
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
	"testing"
	"time"

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
// answer). Each connection that stalls is told on stalled, and its end
// by the mirror's closing it on closed; the proxy closes each 10
// seconds after it was opened, and at the test's end.
func stallingSOCKS(t *testing.T, stage string) (addr string, stalled, closed <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stalledc := make(chan struct{}, 16)
	closedc := make(chan struct{}, 16)
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
		c.SetDeadline(time.Now().Add(10 * time.Second))
		var hdr [2]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		if _, err := io.ReadFull(c, make([]byte, hdr[1])); err != nil {
			return
		}
		buf := make([]byte, 512)
		switch stage {
		case "credentials":
			c.Write([]byte{5, 2})
			if _, err := c.Read(buf); err != nil {
				return
			}
		case "connect":
			c.Write([]byte{5, 0})
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
		stalledc <- struct{}{}
		for {
			if _, err := c.Read(buf); err != nil {
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					closedc <- struct{}{}
				}
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
	return ln.Addr().String(), stalledc, closedc
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
// passed (within 3 times the bound), and the request fails then, not
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
	const bound = 300 * time.Millisecond
	s := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, discoveryDoc("/v1/providers/"))
	}))
	for _, tc := range []struct {
		stage     string
		proxys    bool
		outcome   string
		wantWords string
	}{
		{stage: "greeting", proxys: true, outcome: "proxy", wantWords: "could not be reached on the way to " + string(s.host) + " (it did not answer in time)"},
		{stage: "credentials", proxys: true, outcome: "proxy", wantWords: "could not be reached on the way to " + string(s.host) + " (it did not answer in time)"},
		{stage: "connect", outcome: "timeout", wantWords: "the connection to the host through the upstream proxy was not opened within 300ms"},
	} {
		t.Run(tc.stage, func(t *testing.T) {
			real, stalled, closed := stallingSOCKS(t, tc.stage)
			obs := &discoveryCounter{}
			var logs logbuf.Buffer
			c := leakProxyClient(t, s, "socks5", leakProxyName, real, nil, &logs, func(cfg *Config) {
				cfg.Observer = obs
				cfg.RequestTimeout = 20 * bound
			})
			c.tr.guard.proxyHandshake = bound
			before := goroutines()
			errc := make(chan error, 1)
			start := time.Now()
			go func() {
				_, err := c.Discover(context.Background(), s.host)
				errc <- err
			}()
			select {
			case <-stalled:
			case err := <-errc:
				t.Fatalf("the request ended before the proxy stalled: %v", err)
			case <-time.After(5 * time.Second):
				t.Fatal("the proxy was not asked")
			}
			select {
			case <-closed:
			case <-time.After(8 * bound):
				t.Fatalf("the proxy's connection was still open %s after it stalled (the bound is %s)", 8*bound, bound)
			}
			var err error
			select {
			case err = <-errc:
			case <-time.After(5 * time.Second):
				t.Fatal("the request did not end once the proxy's connection was closed")
			}
			if took := time.Since(start); err == nil || took < bound || took >= 20*bound {
				t.Fatalf("the request ended after %s with %v, want an error after the bound (%s), before its own timeout (%s)", took, err, bound, 20*bound)
			}
			if !strings.Contains(err.Error(), tc.wantWords) {
				t.Errorf("error %q does not say %q", err, tc.wantWords)
			}
			var pe *ProxyError
			if got := errors.As(err, &pe); got != tc.proxys {
				t.Errorf("err = %v: the proxy's = %v, want %v", err, got, tc.proxys)
			}
			if oe := wantOriginError(t, err, OpDiscovery, 0); !oe.Timeout() {
				t.Errorf("err = %v, not a timeout", err)
			}
			if got := obs.seen(); len(got) != 1 || got[0] != tc.outcome {
				t.Errorf("observed outcomes %q, want [%s]", got, tc.outcome)
			}
			if got := c.Circuit(string(s.host)).Failures; got != 1 {
				t.Errorf("the origin's circuit breaker counted %d failures, want 1", got)
			}
			logged := strings.Contains(logs.String(), "upstream proxy could not be reached")
			if logged != tc.proxys {
				t.Errorf("logged that the upstream proxy could not be reached: %v, want %v; log:\n%s", logged, tc.proxys, logs.String())
			}
			namesNoProxy(t, "the error", err.Error(), real)
			if strings.Contains(logs.String(), leakProxyPass) {
				t.Errorf("the log names the proxy's password:\n%s", logs.String())
			}
			deadline := time.Now().Add(5 * time.Second)
			for len(dialGoroutines(before)) > 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if left := dialGoroutines(before); len(left) > 0 {
				t.Errorf("%d dials outlive the request:\n%s", len(left), strings.Join(left, "\n\n"))
			}
		})
	}
}

// TestSOCKSTunnelOutlivesTheHandshakeBound: through a SOCKS5 upstream
// proxy that works, a download that lasts several times the bound of
// the proxy's handshake completes, over HTTP/1.1 and HTTP/2 with the
// origin: the bound is lifted once the connection is given to the
// request. The connection, idle longer than the bound, carries the next
// request (the proxy is asked once).
func TestSOCKSTunnelOutlivesTheHandshakeBound(t *testing.T) {
	const bound = 200 * time.Millisecond
	const chunk, chunks = 1 << 10, 5
	for _, h2 := range []bool{false, true} {
		proto := "HTTP/1.1"
		if h2 {
			proto = "HTTP/2.0"
		}
		t.Run(proto, func(t *testing.T) {
			var protos sync.Map
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				protos.Store(r.Proto, true)
				if r.URL.Path != "/slow.zip" {
					w.Write([]byte("ok"))
					return
				}
				for range chunks {
					w.Write(bytes.Repeat([]byte("x"), chunk))
					w.(http.Flusher).Flush()
					select {
					case <-time.After(bound):
					case <-r.Context().Done():
						return
					}
				}
			})
			s := newTestServer(t, h)
			if h2 {
				s = newH2Server(t, h)
			}
			proxySrv := socks5test.Start(t, socks5test.Options{})
			c := newTestClient(t, s, func(cfg *Config) {
				cfg.Proxy = http.ProxyURL(&url.URL{Scheme: "socks5", Host: proxySrv.Addr})
				cfg.Retries = -1
			})
			c.tr.guard.proxyHandshake = bound
			prov := testProvider(s)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			body, _, err := c.OpenArchive(ctx, prov, s.url("/slow.zip"))
			if err != nil {
				t.Fatalf("the archive through the SOCKS5 proxy: %v", err)
			}
			data, err := io.ReadAll(body)
			body.Close()
			if err != nil || len(data) != chunk*chunks {
				t.Fatalf("read %d bytes of %d in %s: %v", len(data), chunk*chunks, time.Since(start), err)
			}
			if took := time.Since(start); took < 3*bound {
				t.Fatalf("the download took %s, want more than %s (3 times the bound)", took, 3*bound)
			}
			time.Sleep(2 * bound) // the connection idle past its bound
			if doc, err := c.FetchDocument(ctx, prov, s.url("/doc"), 0); err != nil || string(doc) != "ok" {
				t.Fatalf("the next request: %q, %v", doc, err)
			}
			if got := proxySrv.Handshakes(); got != 1 {
				t.Errorf("the proxy was asked %d times, want 1 (the idle connection carries the next request)", got)
			}
			if _, ok := protos.Load(proto); !ok {
				t.Errorf("the origin was not asked over %s", proto)
			}
		})
	}
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
	const bound = 200 * time.Millisecond
	for _, h2 := range []bool{false, true} {
		proto := "HTTP/1.1"
		if h2 {
			proto = "HTTP/2.0"
		}
		t.Run(proto, func(t *testing.T) {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
			s := newTestServer(t, h)
			if h2 {
				s = newH2Server(t, h)
			}
			proxySrv := socks5test.Start(t, socks5test.Options{})
			c := newTestClient(t, s, func(cfg *Config) {
				cfg.Proxy = http.ProxyURL(&url.URL{Scheme: "socks5", Host: proxySrv.Addr})
				cfg.Retries = -1
				cfg.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
					time.Sleep(3 * bound / 4) // the request goes away meanwhile
					var d net.Dialer
					return d.DialContext(ctx, network, addr)
				}
			})
			c.tr.guard.proxyHandshake = bound
			prov := testProvider(s)
			ctx, cancel := context.WithTimeout(context.Background(), bound/4)
			_, err := c.FetchDocument(ctx, prov, s.url("/gone"), 0)
			cancel()
			if err == nil {
				t.Fatal("the request that went away succeeded")
			}
			time.Sleep(10 * bound) // the dial done, and its connection idle past the bound
			if doc, err := c.FetchDocument(context.Background(), prov, s.url("/doc"), 0); err != nil || string(doc) != "ok" {
				t.Fatalf("the next request: %q, %v", doc, err)
			}
			if got := proxySrv.Handshakes(); got != 1 {
				t.Errorf("the proxy was asked %d times, want 1 (the connection dialled for the request gone carries the next)", got)
			}
		})
	}
}
