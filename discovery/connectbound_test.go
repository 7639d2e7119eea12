package discovery

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
)

// silentConnectProxy is an HTTP upstream proxy on loopback, reached over
// TLS with cert when it is not nil, that reads each CONNECT and answers
// nothing (as a proxy waiting for a host that does not answer). How each
// connection ended is told on ends (stallingProxy).
func silentConnectProxy(t *testing.T, cert *tls.Certificate) (addr string, ends <-chan stallEnd) {
	return stallingProxy(t, func(c net.Conn) bool {
		var r io.Reader = c
		if cert != nil {
			tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{*cert}})
			if err := tc.Handshake(); err != nil {
				return false
			}
			r = tc
		}
		req, err := http.ReadRequest(bufio.NewReader(r))
		return err == nil && req.Method == http.MethodConnect
	})
}

// TestHTTPProxyCONNECTIsBounded: an HTTP upstream proxy, reached in
// plain TCP or over TLS, that reads the CONNECT and then answers
// nothing has its connection closed by the mirror once the bound of
// the proxy's handshake has passed, and the request fails then, with
// the bound's timeout, not sooner, and no goroutine is left dialling:
// net/http dials on a context of its own, which no request's end
// cancels, and gives the proxy a minute to answer, which held the
// connection and its goroutine for that long after the request had
// given up, the request's every attempt its own. The proxy was asked
// for the host and is waiting for it, whose timeout it is (outcome
// "timeout", counted toward the origin's circuit breaker), as with a
// SOCKS5 proxy asked for the host; nothing says the proxy could not be
// reached. No error names the proxy's address.
func TestHTTPProxyCONNECTIsBounded(t *testing.T) {
	s := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, discoveryDoc("/v1/providers/"))
	}))
	ca := newTestCA(t)
	cert := ca.issue(t, []string{leakProxyName}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	for _, tc := range []struct {
		scheme string
		cert   *tls.Certificate
	}{
		{scheme: "http"},
		{scheme: "https", cert: &cert},
	} {
		t.Run(tc.scheme, func(t *testing.T) {
			checkStalledHandshake(t, s, stalledProxy{
				kind:   strings.ToUpper(tc.scheme),
				scheme: tc.scheme,
				start: func(t *testing.T) (string, <-chan stallEnd) {
					return silentConnectProxy(t, tc.cert)
				},
				config: func(cfg *Config) {
					pool := rootCAs(t, s)
					pool.AddCert(ca.cert)
					cfg.RootCAs = pool
				},
				hostAsked: true,
			})
		})
	}
}

// countingTunnel is an HTTP upstream proxy on loopback that opens the
// tunnels asked for with CONNECT, counting them.
func countingTunnel(t *testing.T) (proxyURL *url.URL, connects *atomic.Int32) {
	t.Helper()
	connects = &atomic.Int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		connects.Add(1)
		tunnel(w, r)
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u, connects
}

// TestHTTPProxyTunnelOutlivesTheCONNECTBound: through an HTTP upstream
// proxy that works, a download that lasts several times the bound of
// the proxy's answer to CONNECT completes, over HTTP/1.1 and HTTP/2 with
// the origin: the bound is lifted once the proxy answered. The
// connection, idle longer than the bound, carries the next request (the
// proxy is asked once). So does a connection dialled for a request that
// went away before the proxy answered, which goes to the idle
// connections as any other.
func TestHTTPProxyTunnelOutlivesTheCONNECTBound(t *testing.T) {
	p := tunnelProxy{
		kind:      "HTTP",
		handshake: "the HTTP proxy's answer to the CONNECT",
		start: func(t *testing.T) (*url.URL, func() int) {
			proxyURL, connects := countingTunnel(t)
			return proxyURL, func() int { return int(connects.Load()) }
		},
	}
	for _, proto := range tunnelProtos {
		t.Run(proto+"/download", func(t *testing.T) { p.download(t, proto) })
		t.Run(proto+"/request gone", func(t *testing.T) { p.requestGone(t, proto) })
	}
}

// TestHTTPSProxySilentInTLSDoesNotAnswer: an https:// upstream proxy
// that takes the connection and answers nothing of the TLS handshake
// has net/http's bound of a TLS handshake (TLSHandshakeTimeout), and
// does not answer, as a proxy not reached (outcome "proxy", the log
// saying so at error level): it was not asked for the host yet, and
// the bound of its answer to CONNECT, shorter here, does not run yet.
func TestHTTPSProxySilentInTLSDoesNotAnswer(t *testing.T) {
	const bound, tlsBound = 100 * time.Millisecond, 400 * time.Millisecond
	s := newTestServer(t, http.NotFoundHandler())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				io.Copy(io.Discard, c)
			})
		}
	})
	real := ln.Addr().String()
	obs := &discoveryCounter{}
	var logs logbuf.Buffer
	c := leakProxyClient(t, s, "https", leakProxyName, real, nil, &logs, func(cfg *Config) {
		cfg.Observer = obs
		cfg.RequestTimeout = 20 * tlsBound
	})
	c.tr.guard.proxyHandshake = bound
	c.tr.base.cur.Load().TLSHandshakeTimeout = tlsBound
	start := time.Now()
	_, err = c.Discover(context.Background(), s.host)
	if took := time.Since(start); err == nil || took < tlsBound || took >= 20*tlsBound {
		t.Fatalf("the request ended after %s with %v, want an error after the TLS handshake's bound (%s)", took, err, tlsBound)
	}
	var pe *ProxyError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "could not be reached on the way to "+string(s.host)+" (it did not answer in time)") {
		t.Errorf("err = %v (%T), want the proxy's, not reached", err, err)
	}
	if got := obs.seen(); len(got) != 1 || got[0] != "proxy" {
		t.Errorf("observed outcomes %q, want [proxy]", got)
	}
	if !strings.Contains(logs.String(), "upstream proxy could not be reached") {
		t.Errorf("no log line that the upstream proxy could not be reached:\n%s", logs.String())
	}
	namesNoProxy(t, "the error", err.Error(), real)
}

// TestHTTPProxyCONNECTBoundIsEachDialsOwn: a request may dial the HTTP
// proxy again while its first dial waits for the answer to its CONNECT
// (it was given another connection meanwhile, which failed). Each
// connection has the bound from its own CONNECT until its own answer:
// the first dial's answer, read while the second was being dialled,
// left the second CONNECT with net/http's minute; and the first CONNECT
// started the second's bound, from before its own (an https:// proxy's
// TLS handshake), cutting an answer in time. The transport's hooks are
// called as net/http calls them, each dial on a context of its own.
func TestHTTPProxyCONNECTBoundIsEachDialsOwn(t *testing.T) {
	const bound = 500 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 4)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		close(accepted)
		for c := range accepted {
			c.Close()
		}
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	})
	proxyURL := &url.URL{Scheme: "http", Host: ln.Addr().String()}
	s := newTestServer(t, http.NotFoundHandler())
	c := newTestClient(t, s, func(cfg *Config) { cfg.Proxy = http.ProxyURL(proxyURL) })
	c.tr.guard.proxyHandshake = bound
	base := c.tr.base.cur.Load()
	req, err := http.NewRequestWithContext(withProxyChoice(context.Background()), http.MethodGet, s.url("/"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := base.Proxy(req); err != nil {
		t.Fatal(err)
	}
	target := req.URL.Host
	// dial dials the proxy as net/http does, on a context of its own
	// with the request's values; the proxy's end is returned too.
	dial := func() (context.Context, net.Conn, net.Conn) {
		ctx, cancel := context.WithCancel(context.WithoutCancel(req.Context()))
		t.Cleanup(cancel)
		conn, err := base.DialContext(ctx, "tcp", proxyURL.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return ctx, conn, <-accepted
	}
	ask := func(ctx context.Context) {
		if _, err := base.GetProxyConnectHeader(ctx, proxyURL, target); err != nil {
			t.Fatal(err)
		}
	}
	answer := func(ctx context.Context) {
		connectReq := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: target}, Host: target}
		if err := base.OnProxyConnectResponse(ctx, proxyURL, connectReq, &http.Response{StatusCode: http.StatusOK}); err != nil {
			t.Fatal(err)
		}
	}
	// readAnswer starts reading conn, the mirror's end, before the
	// CONNECT is asked, so that an answer written once it is asked is
	// read however late the reader runs; wait is the read's error, or
	// one of its own once stallBackstop, far past the bound, has passed.
	readAnswer := func(conn net.Conn) (wait func() error) {
		done := make(chan error, 1)
		go func() {
			_, err := conn.Read(make([]byte, 64))
			done <- err
		}()
		return func() error {
			select {
			case err := <-done:
				return err
			case <-time.After(stallBackstop):
				conn.Close()
				<-done
				return fmt.Errorf("no end to the read in %s", stallBackstop)
			}
		}
	}

	t.Run("answered while the other was dialled", func(t *testing.T) {
		first, _, firstProxy := dial()
		defer firstProxy.Close()
		ask(first)
		second, conn, secondProxy := dial()
		defer secondProxy.Close()
		answer(first)
		wait := readAnswer(conn)
		start := time.Now()
		ask(second) // and the proxy does not answer it
		err := wait()
		if took := time.Since(start); !errors.As(err, new(*proxyStall)) || took < bound {
			t.Errorf("the second CONNECT, not answered, ended after %s with %v; want the bound's timeout after %s", took, err, bound)
		}
	})
	t.Run("asked while the other was dialled", func(t *testing.T) {
		first, _, firstProxy := dial()
		defer firstProxy.Close()
		second, conn, secondProxy := dial()
		defer secondProxy.Close()
		ask(first)
		// The second in its TLS handshake with the proxy until the
		// first's bound has passed: from the first's CONNECT, the
		// second's would be over before it is asked.
		time.Sleep(bound + bound/2)
		wait := readAnswer(conn)
		ask(second)
		secondProxy.Write([]byte("HTTP/1.1 200 OK\r\n\r\n"))
		if err := wait(); err != nil {
			t.Errorf("the second CONNECT, answered as soon as it was asked, %s after the first was: %v", bound+bound/2, err)
		}
		answer(second)
	})
}
