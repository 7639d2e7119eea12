package discovery

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	svchost "github.com/hashicorp/terraform-svchost"
)

// testCA is a CA that signs server certificates for tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test company CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key}
}

// issue makes a server certificate for names, valid from notBefore to
// notAfter.
func (ca *testCA) issue(t *testing.T, names []string, notBefore, notAfter time.Time) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: notBefore, NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestUntrustedCertificate: a certificate signed by a CA the client does
// not trust, issued for another host, or expired, fails at once with a
// *CertificateError naming the cause and the operator's hint: no retry,
// no step toward the circuit breaker, outcome "untrusted", one log record
// per host however many requests fail; trusting the CA makes the same
// origin work.
func TestUntrustedCertificate(t *testing.T) {
	ca := newTestCA(t)
	now := time.Now()
	for _, tc := range []struct {
		name      string
		names     []string
		from, to  time.Time
		trustCA   bool
		wantCause string
	}{
		{"unknown authority", []string{"127.0.0.1"}, now.Add(-time.Hour), now.Add(time.Hour), false, "signed by an unknown authority"},
		{"other host", []string{"registry.example.com"}, now.Add(-time.Hour), now.Add(time.Hour), true, "not valid for this host name"},
		{"expired", []string{"127.0.0.1"}, now.Add(-2 * time.Hour), now.Add(-time.Hour), true, "expired or not yet valid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var handshakes atomic.Int32
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, discoveryDoc("/v1/providers/"))
			}))
			srv.TLS = &tls.Config{
				Certificates: []tls.Certificate{ca.issue(t, tc.names, tc.from, tc.to)},
				GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
					handshakes.Add(1)
					return nil, nil
				},
			}
			srv.StartTLS()
			t.Cleanup(srv.Close)
			host, err := svchost.ForComparison(srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			pool := x509.NewCertPool() // "the system roots": not the test CA
			if tc.trustCA {
				pool.AddCert(ca.cert)
			}
			var logs bytes.Buffer
			c := newTestClient(t, &testServer{srv: srv, host: host}, func(cfg *Config) {
				cfg.RootCAs = pool
				cfg.Retries = 2
				cfg.BreakerThreshold = 1
				cfg.TrustHint = "add the CA with origin_ca_file"
				cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			})
			for i := range 3 {
				_, err := c.Discover(context.Background(), host)
				var ce *CertificateError
				if !errors.As(err, &ce) || !errors.Is(err, ErrUntrustedCertificate) {
					t.Fatalf("request %d: %v (%T), want a *CertificateError", i, err, err)
				}
				wantOriginError(t, err, OpDiscovery, 0)
				for _, want := range []string{tc.wantCause, "add the CA with origin_ca_file", string(host)} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
				if errors.Is(err, ErrCircuitOpen) {
					t.Fatalf("request %d: the circuit opened on a certificate failure", i)
				}
				if got := Outcome(err); got != "untrusted" {
					t.Errorf("Outcome = %q, want untrusted", got)
				}
			}
			if got := handshakes.Load(); got != 3 {
				t.Errorf("%d TLS handshakes for 3 requests, want 3 (no retries, no open circuit)", got)
			}
			if n := strings.Count(logs.String(), "origin TLS certificate not trusted"); n != 1 {
				t.Errorf("%d log records of the failure, want 1 per host:\n%s", n, logs.String())
			}
			if !strings.Contains(logs.String(), tc.wantCause) || !strings.Contains(logs.String(), "origin_ca_file") {
				t.Errorf("the log does not name the cause and the setting:\n%s", logs.String())
			}
		})
	}

	// The same origin, its CA trusted: it answers.
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, discoveryDoc("/v1/providers/"))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.issue(t, []string{"127.0.0.1"}, now.Add(-time.Hour), now.Add(time.Hour))}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	host, _ := svchost.ForComparison(srv.Listener.Addr().String())
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	c := newTestClient(t, &testServer{srv: srv, host: host}, func(cfg *Config) { cfg.RootCAs = pool })
	if _, err := c.Discover(context.Background(), host); err != nil {
		t.Fatalf("with the CA trusted: %v", err)
	}
}

// TestUntrustedSourceHost: module sources, archives (OpenSource) and Git's
// smart HTTP (SourceHTTPClient), go through the same check: a source host
// whose certificate is not trusted fails with a *CertificateError naming
// the operator's hint; trusting its CA makes it work.
func TestUntrustedSourceHost(t *testing.T) {
	ca := newTestCA(t)
	now := time.Now()
	src := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("package"))
	}))
	src.TLS = &tls.Config{Certificates: []tls.Certificate{ca.issue(t, []string{"127.0.0.1"}, now.Add(-time.Hour), now.Add(time.Hour))}}
	src.StartTLS()
	t.Cleanup(src.Close)
	origin := newTestServer(t, http.NotFoundHandler())
	for _, trust := range []bool{false, true} {
		pool := rootCAs(t, origin)
		if trust {
			pool.AddCert(ca.cert)
		}
		c := newTestClient(t, origin, func(cfg *Config) {
			cfg.RootCAs = pool
			cfg.TrustHint = "add it with origin_ca_file"
		})
		body, _, err := c.OpenSource(context.Background(), origin.host, src.URL+"/module.tar.gz")
		if body != nil {
			body.Close()
		}
		resp, gerr := c.SourceHTTPClient(origin.host).Get(src.URL + "/repo.git/info/refs")
		if resp != nil {
			resp.Body.Close()
		}
		for what, err := range map[string]error{"OpenSource": err, "SourceHTTPClient": gerr} {
			switch {
			case trust && err != nil:
				t.Errorf("%s, CA trusted: %v", what, err)
			case !trust && (!errors.Is(err, ErrUntrustedCertificate) || !strings.Contains(err.Error(), "origin_ca_file")):
				t.Errorf("%s, CA not trusted: %v, want a certificate error naming the hint", what, err)
			}
		}
	}
}

// TestUntrustedProxyCertificate: an upstream proxy reached over TLS
// (an https:// proxy URL) whose own certificate is not trusted fails
// every request with a *CertificateError that says the proxy's
// certificate is the one refused, not the origin's (the origin was never
// reached), and names neither the proxy's address nor its credentials.
// Its CA among the trusted ones (origin_ca_file's), requests go through.
func TestUntrustedProxyCertificate(t *testing.T) {
	ca := newTestCA(t)
	now := time.Now()
	proxySrv := httptest.NewUnstartedServer(http.HandlerFunc(tunnel))
	proxySrv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.issue(t, []string{"127.0.0.1"}, now.Add(-time.Hour), now.Add(time.Hour))}}
	proxySrv.StartTLS()
	t.Cleanup(proxySrv.Close)
	proxyURL, _ := url.Parse(proxySrv.URL)
	proxyURL.User = url.UserPassword("mirror", "s3cret-proxy-pass")
	s := newTestServer(t, http.NotFoundHandler())
	c := newTestClient(t, s, func(cfg *Config) {
		cfg.Proxy = http.ProxyURL(proxyURL) // the origin trusted, the proxy's CA not
		cfg.TrustHint = "add the CA with origin_ca_file"
	})
	_, err := c.Discover(context.Background(), s.host)
	var ce *CertificateError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v (%T), want a *CertificateError", err, err)
	}
	if !ce.Proxy {
		t.Errorf("CertificateError.Proxy = false for the proxy's certificate")
	}
	for _, want := range []string{"TLS certificate of the upstream proxy", "upstream_proxy", "origin_ca_file"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	for _, wrong := range []string{"TLS certificate of " + string(s.host), "s3cret-proxy-pass", proxyURL.Host} {
		if strings.Contains(err.Error(), wrong) {
			t.Errorf("error %q says %q", err, wrong)
		}
	}

	pool := rootCAs(t, s)
	pool.AddCert(ca.cert)
	c = newTestClient(t, s, func(cfg *Config) {
		cfg.Proxy = http.ProxyURL(proxyURL)
		cfg.RootCAs = pool
	})
	if _, err := c.Discover(context.Background(), s.host); err == nil || !errors.Is(err, ErrNoProviderService) {
		t.Fatalf("with the proxy's CA trusted: %v, want the origin's own answer (no providers.v1)", err)
	}
}

// tunnel is an HTTP proxy's CONNECT: it joins the client to the target.
func tunnel(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
		return
	}
	target, err := net.Dial("tcp", r.Host)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	w.WriteHeader(http.StatusOK)
	client, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		target.Close()
		return
	}
	rw.Flush()
	go func() { io.Copy(target, rw); target.Close() }()
	io.Copy(client, target)
	client.Close()
}

// TestRootCAsReplaced: CAs put in force while the client serves
// (SetRootCAs, a reload of origin_ca_file's files) decide every request
// from then on: a CA removed is trusted no more, even by a host whose
// connection it verified and which is kept alive, and a CA added is
// trusted at once.
func TestRootCAsReplaced(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	now := time.Now()
	var handshakes atomic.Int32
	src := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("package"))
	}))
	src.TLS = &tls.Config{
		Certificates: []tls.Certificate{ca.issue(t, []string{"127.0.0.1"}, now.Add(-time.Hour), now.Add(time.Hour))},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			handshakes.Add(1)
			return nil, nil
		},
	}
	var closed atomic.Int32
	src.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			closed.Add(1)
		}
	}
	src.StartTLS()
	t.Cleanup(src.Close)
	origin := newTestServer(t, http.NotFoundHandler())
	pools := func(cas ...*testCA) *x509.CertPool {
		pool := rootCAs(t, origin)
		for _, c := range cas {
			pool.AddCert(c.cert)
		}
		return pool
	}
	c := newTestClient(t, origin, func(cfg *Config) { cfg.RootCAs = pools(ca) })
	get := func() error {
		resp, err := c.SourceHTTPClient(origin.host).Get(src.URL + "/repo.git/info/refs")
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return err
	}
	for _, step := range []struct {
		name    string
		roots   *x509.CertPool
		trusted bool
	}{
		{"the CA trusted at start", nil, true},
		{"the same connection again", nil, true},
		{"the CA removed", pools(other), false},
		{"the CA added back", pools(other, ca), true},
	} {
		if step.roots != nil {
			c.SetRootCAs(step.roots)
		}
		err := get()
		switch {
		case step.trusted && err != nil:
			t.Fatalf("%s: %v", step.name, err)
		case !step.trusted && !errors.Is(err, ErrUntrustedCertificate):
			t.Fatalf("%s: %v, want a certificate error", step.name, err)
		}
	}
	// One handshake at start (the second request reuses its connection),
	// one refused after the CA went, one once it came back.
	if got := handshakes.Load(); got != 3 {
		t.Errorf("%d TLS handshakes, want 3: the connection verified before the CA was removed must not be reused", got)
	}
	// The connections verified against CAs no longer in force are closed,
	// not left idle: the first one, and the refused handshake's.
	for i := 0; closed.Load() < 2 && i < 100; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if got := closed.Load(); got < 2 {
		t.Errorf("%d connections closed, want the one verified before the CAs changed closed too", got)
	}
}
