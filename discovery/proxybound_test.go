package discovery

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
)

// The scenarios of the bound of an upstream proxy's handshake, each
// written once and run through an HTTP proxy (connectbound_test.go) and
// a SOCKS5 proxy (socks_test.go).

// stalledProxy is an upstream proxy that stalls in its handshake, for
// checkStalledHandshake.
type stalledProxy struct {
	kind   string // the proxy's kind, named in failures: "HTTP", "SOCKS5"
	scheme string // of the proxy's URL
	// start starts the proxy: its address, and how each of its
	// connections ended (stallingProxy).
	start  func(t *testing.T) (addr string, ends <-chan stallEnd)
	config func(*Config) // more of the client's settings, or nil
	// hostAsked: the proxy stalls once asked for the host, waiting for
	// it (the host's timeout, observed as "timeout"); else before that,
	// not answering (the proxy's error, observed as "proxy" and logged).
	hostAsked bool
}

// checkStalledHandshake makes a discovery request of s through p, on
// bounds of the proxy's handshake from 300ms up (tryBounds), and fails t
// unless the mirror closed the proxy's connection once the bound had
// passed and the request failed then with the bound's timeout, said in
// the words of where the proxy stalled, observed and counted toward the
// origin's circuit breaker once, logged as a proxy not reached when it
// was not asked for the host (and only then), naming neither the
// proxy's address nor its password, with no goroutine left dialling.
func checkStalledHandshake(t *testing.T, s *testServer, p stalledProxy) {
	t.Helper()
	notReached, outcome := !p.hostAsked, "proxy"
	if p.hostAsked {
		outcome = "timeout"
	}
	tryBounds(t, 300*time.Millisecond, func(bound time.Duration, last bool) bool {
		real, ends := p.start(t)
		obs := &discoveryCounter{}
		var logs logbuf.Buffer
		c := leakProxyClient(t, s, p.scheme, leakProxyName, real, nil, &logs, func(cfg *Config) {
			cfg.Observer = obs
			cfg.RequestTimeout = stallRequestTimeout
			if p.config != nil {
				p.config(cfg)
			}
		})
		c.tr.guard.proxyHandshake = bound
		before := goroutines()
		took, end, err := discoverStalled(t, c, s.host, ends)
		if !end.stalled {
			if !last && errors.As(err, new(*proxyStall)) {
				return true
			}
			t.Fatalf("the request ended after %s, before the %s proxy stalled: %v", took, p.kind, err)
		}
		stalledBounded(t, err, took, end, bound, p.hostAsked)
		want := "could not be reached on the way to " + string(s.host) + " (it did not answer in time)"
		if p.hostAsked {
			want = "the connection to the host through the upstream proxy was not opened within " + bound.String()
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s proxy: error %q does not say %q", p.kind, err, want)
		}
		if got := errors.As(err, new(*ProxyError)); got != notReached {
			t.Errorf("%s proxy: err = %v: the proxy's = %v, want %v (the host's timeout when the host was asked for)", p.kind, err, got, notReached)
		}
		if oe := wantOriginError(t, err, OpDiscovery, 0); !oe.Timeout() {
			t.Errorf("%s proxy: err = %v, not a timeout", p.kind, err)
		}
		if got := obs.seen(); len(got) != 1 || got[0] != outcome {
			t.Errorf("%s proxy: observed outcomes %q, want [%s]", p.kind, got, outcome)
		}
		if got := c.Circuit(string(s.host)).Failures; got != 1 {
			t.Errorf("%s proxy: the origin's circuit breaker counted %d failures, want 1", p.kind, got)
		}
		if logged := strings.Contains(logs.String(), "upstream proxy could not be reached"); logged != notReached {
			t.Errorf("%s proxy: logged that the upstream proxy could not be reached: %v, want %v; log:\n%s", p.kind, logged, notReached, logs.String())
		}
		namesNoProxy(t, "the error", err.Error(), real)
		if strings.Contains(logs.String(), leakProxyPass) {
			t.Errorf("%s proxy: the log names the proxy's password:\n%s", p.kind, logs.String())
		}
		noDialsLeft(t, before)
		return false
	})
}

// tunnelProtos are the protocols with the origin that a tunnel through
// an upstream proxy is tested with.
var tunnelProtos = []string{"HTTP/1.1", "HTTP/2.0"}

// tunnelProxy is an upstream proxy that works, for the tests of a tunnel
// outliving the bound of the proxy's handshake.
type tunnelProxy struct {
	kind      string // the proxy's kind, named in failures: "HTTP", "SOCKS5"
	handshake string // what of the proxy the bound is on, named in failures
	// start starts the proxy: its URL, and how many times it was asked
	// for a connection so far.
	start func(t *testing.T) (proxyURL *url.URL, asked func() int)
}

// tunnelChunk and tunnelChunks are the size of a piece of the slow
// download of tunnelOrigin, and how many it sends.
const tunnelChunk, tunnelChunks = 1 << 10, 5

// tunnelOrigin is an origin speaking proto that answers each request
// with the protocol it was asked over, but /slow.zip, which it sends in
// tunnelChunks pieces of tunnelChunk bytes, every apart.
func tunnelOrigin(t *testing.T, proto string, every time.Duration) *testServer {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/slow.zip" {
			w.Write([]byte(r.Proto))
			return
		}
		for range tunnelChunks {
			w.Write(bytes.Repeat([]byte("x"), tunnelChunk))
			w.(http.Flusher).Flush()
			select {
			case <-time.After(every):
			case <-r.Context().Done():
				return
			}
		}
	})
	if proto == "HTTP/2.0" {
		return newH2Server(t, h)
	}
	return newTestServer(t, h)
}

// client is a client of s through a new proxy p, not retrying, whose
// bound of the proxy's handshake is bound, dialling with dial when it is
// not nil; and how many times the proxy was asked so far.
func (p tunnelProxy) client(t *testing.T, s *testServer, bound time.Duration, dial func(context.Context, string, string) (net.Conn, error)) (*Client, func() int) {
	proxyURL, asked := p.start(t)
	c := newTestClient(t, s, func(cfg *Config) {
		cfg.Proxy = http.ProxyURL(proxyURL)
		cfg.Retries = -1
		if dial != nil {
			cfg.DialContext = dial
		}
	})
	c.tr.guard.proxyHandshake = bound
	return c, asked
}

// nextRequest waits until the connection to s through p, idle, is past
// bound, and fails t unless it carries a request over proto and the
// proxy was asked once in all (why says what the connection was first
// used for).
func (p tunnelProxy) nextRequest(t *testing.T, ctx context.Context, c *Client, s *testServer, proto string, bound time.Duration, asked func() int, why string) {
	t.Helper()
	time.Sleep(2 * bound) // the connection idle past its bound
	if doc, err := c.FetchDocument(ctx, testProvider(s), s.url("/doc"), 0); err != nil || string(doc) != proto {
		t.Fatalf("the next request through the %s proxy: %q, %v; want %q (the origin asked over %s)", p.kind, doc, err, proto, proto)
	}
	if got := asked(); got != 1 {
		t.Errorf("the %s proxy was asked %d times, want 1 (%s)", p.kind, got, why)
	}
}

// download checks that a download through p with the origin over proto,
// lasting several times the bound of the proxy's handshake, completes,
// and that its connection, idle past the bound, carries the next
// request.
func (p tunnelProxy) download(t *testing.T, proto string) {
	tryBounds(t, 200*time.Millisecond, func(bound time.Duration, last bool) bool {
		s := tunnelOrigin(t, proto, bound)
		c, asked := p.client(t, s, bound, nil)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		body, _, err := c.OpenArchive(ctx, testProvider(s), s.url("/slow.zip"))
		if err != nil {
			if !last && errors.As(err, new(*proxyStall)) {
				return true // the handshake not done within the bound
			}
			t.Fatalf("the archive through the %s proxy: %v", p.kind, err)
		}
		data, err := io.ReadAll(body)
		body.Close()
		if err != nil || len(data) != tunnelChunk*tunnelChunks {
			t.Fatalf("through the %s proxy, read %d bytes of %d in %s: %v", p.kind, len(data), tunnelChunk*tunnelChunks, time.Since(start), err)
		}
		if took := time.Since(start); took < 3*bound {
			t.Fatalf("the download through the %s proxy took %s, want more than %s (3 times the bound)", p.kind, took, 3*bound)
		}
		p.nextRequest(t, ctx, c, s, proto, bound, asked, "the idle connection carries the next request")
		return false
	})
}

// requestGone checks that a connection through p dialled for a request
// that went away before the proxy's handshake was done carries a request
// over proto made after the bound of the handshake has passed.
func (p tunnelProxy) requestGone(t *testing.T, proto string) {
	tryBounds(t, 200*time.Millisecond, func(bound time.Duration, last bool) bool {
		s := tunnelOrigin(t, proto, bound)
		gd := &goneDialer{}
		c, asked := p.client(t, s, bound, gd.dial)
		if gd.request(t, func(ctx context.Context) error {
			_, err := c.FetchDocument(ctx, testProvider(s), s.url("/gone"), 0)
			return err
		}) {
			if !last {
				return true
			}
			t.Fatalf("%s of the request gone was not done within the bound (%s)", p.handshake, bound)
		}
		p.nextRequest(t, context.Background(), c, s, proto, bound, asked, "the connection dialled for the request gone carries the next")
		return false
	})
}
