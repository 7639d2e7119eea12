package discovery

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	svchost "github.com/hashicorp/terraform-svchost"
)

// hitCounter wraps a handler and counts requests per path, recording the
// last request's headers.
type hitCounter struct {
	mu      sync.Mutex
	hits    map[string]int
	headers map[string]http.Header
	next    http.Handler
}

func (h *hitCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.hits[r.URL.Path]++
	h.headers[r.URL.Path] = r.Header.Clone()
	h.mu.Unlock()
	h.next.ServeHTTP(w, r)
}

func (h *hitCounter) count(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hits[path]
}

func (h *hitCounter) total() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, v := range h.hits {
		n += v
	}
	return n
}

func (h *hitCounter) header(path string) http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.headers[path]
}

// testServer is an httptest TLS server on 127.0.0.1 with hit counting.
type testServer struct {
	*hitCounter
	srv  *httptest.Server
	host svchost.Hostname // "127.0.0.1:PORT"
}

func newTestServer(t *testing.T, h http.Handler) *testServer {
	t.Helper()
	hc := &hitCounter{hits: map[string]int{}, headers: map[string]http.Header{}, next: h}
	srv := httptest.NewTLSServer(hc)
	t.Cleanup(srv.Close)
	host, err := svchost.ForComparison(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return &testServer{hitCounter: hc, srv: srv, host: host}
}

func (s *testServer) url(path string) string { return s.srv.URL + path }

// rootCAs trusts the certificate every httptest TLS server uses.
func rootCAs(t *testing.T, s *testServer) *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(s.srv.Certificate())
	return pool
}

// newTestClient returns a client trusting s, allowing s's host as an
// origin, allowed to reach loopback and ignoring proxy environment
// variables; mod adjusts the config.
func newTestClient(t *testing.T, s *testServer, mod func(*Config)) *Client {
	t.Helper()
	cfg := Config{
		AllowedOrigins: []string{string(s.host)},
		RootCAs:        rootCAs(t, s),
		AllowPrivate:   true,
		Proxy:          func(*http.Request) (*url.URL, error) { return nil, nil },
		// Retries are quick in tests; tests of retries set their own.
		RetryBaseDelay: time.Millisecond,
		RetryMaxDelay:  2 * time.Millisecond,
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func writeJSON(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, body)
}

// discoveryHandler answers the discovery document with providers.v1 = base.
func discoveryDoc(base string) string {
	return fmt.Sprintf(`{"providers.v1": %q, "modules.v1": "/v1/modules/"}`, base)
}

// wantOriginError fails unless err is an *OriginError for op with status.
func wantOriginError(t *testing.T, err error, op string, status int) *OriginError {
	t.Helper()
	var oe *OriginError
	if !errors.As(err, &oe) {
		t.Fatalf("error = %v (%T), want *OriginError", err, err)
	}
	if oe.Op != op || oe.StatusCode != status {
		t.Fatalf("OriginError op=%q status=%d (%v), want op=%q status=%d", oe.Op, oe.StatusCode, err, op, status)
	}
	if errors.Is(err, ErrNotFound) {
		t.Fatalf("origin failure %v must not be ErrNotFound", err)
	}
	if !strings.Contains(err.Error(), oe.Host) || !strings.Contains(err.Error(), op) {
		t.Fatalf("message %q does not name host %q and op %q", err, oe.Host, op)
	}
	return oe
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// mapDialer dials "name:port" at 127.0.0.1:port for the names in aliases, so
// that one loopback server can appear under another host name.
func mapDialer(aliases ...string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		for _, a := range aliases {
			if host == a {
				addr = net.JoinHostPort("127.0.0.1", port)
			}
		}
		return d.DialContext(ctx, network, addr)
	}
}
