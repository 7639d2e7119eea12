package originwatch

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/proxy"
)

// fakeCircuits is the origin client's breakers as the watch reads them.
type fakeCircuits map[string]discovery.Circuit

func (f fakeCircuits) Circuit(origin string) discovery.Circuit {
	if c, ok := f[origin]; ok {
		return c
	}
	return discovery.Circuit{State: "closed"}
}

// TestRows: each origin's row says whether it answers, its
// last error with the cause in words and its last success, and counts the
// last hour only; an open breaker makes the origin unavailable; what is
// not an allowed origin, or a caller giving up, is not recorded.
func TestRows(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	circuits := fakeCircuits{}
	w, err := New([]string{"registry.terraform.io", "Registry.OpenTofu.org", "registry.terraform.io"}, circuits, nil, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	rows := w.Rows()
	if len(rows) != 2 || rows[0].Host != "registry.terraform.io" || rows[1].Host != "registry.opentofu.org" || rows[0].State != "unused" {
		t.Fatalf("rows before any request: %+v", rows)
	}

	x509Err := &discovery.OriginError{Host: "registry.terraform.io", Op: discovery.OpVersions,
		Err: fmt.Errorf("tls: failed to verify certificate: %w", x509.UnknownAuthorityError{})}
	w.OriginDone("registry.terraform.io", discovery.OpVersions, nil)
	now = now.Add(time.Minute)
	w.OriginDone("registry.terraform.io", discovery.OpVersions, x509Err)
	w.OriginDone("registry.opentofu.org", discovery.OpVersions, fmt.Errorf("%w: x", discovery.ErrNotFound))
	w.OriginDone("registry.opentofu.org", discovery.OpVersions, fmt.Errorf("gave up: %w", context.Canceled))
	w.OriginDone("evil.example", discovery.OpVersions, errors.New("boom"))
	rows = w.Rows()
	tf, tofu := rows[0], rows[1]
	if tf.State != "failing" || tf.LastError == nil || !tf.LastError.At.Equal(now) || !strings.Contains(tf.LastError.Cause, "certificate signed by unknown authority") ||
		!strings.Contains(tf.LastError.Cause, "origin_ca_file") || !tf.LastSuccess.Equal(now.Add(-time.Minute)) {
		t.Errorf("failing origin's row: %+v %+v", tf, tf.LastError)
	}
	if tf.LastHour.OriginRequests != 2 || tf.LastHour.OriginFailures != 1 {
		t.Errorf("failing origin's counts: %+v", tf.LastHour)
	}
	if tofu.State != "ok" || tofu.LastError != nil || tofu.LastHour.OriginRequests != 1 {
		t.Errorf("an origin that answered not found: %+v", tofu)
	}
	if len(w.origins) != 2 {
		t.Errorf("the watch keeps %d origins, want the 2 allowed", len(w.origins))
	}

	// A success after the error: answering again, the error kept as old.
	w.OriginDone("registry.terraform.io", discovery.OpArchive, nil)
	if r := w.Rows()[0]; r.State != "ok" || r.LastError == nil {
		t.Errorf("after a success: %+v", r)
	}

	// An open breaker. The requests it refuses are not sent: not
	// counted, and the error before them stays the last one.
	circuits["registry.terraform.io"] = discovery.Circuit{State: "open", Failures: 5, RetryAt: now.Add(30 * time.Second)}
	for range 3 {
		w.OriginDone("registry.terraform.io", discovery.OpVersions, &discovery.OriginError{Host: "registry.terraform.io", Op: discovery.OpVersions,
			Err: &discovery.CircuitOpenError{Failures: 5, RetryAfter: 30 * time.Second}})
	}
	if r := w.Rows()[0]; r.State != "unavailable" || r.Breaker != "open" || r.Failures != 5 || !r.RetryAt.Equal(now.Add(30*time.Second)) ||
		r.LastError == nil || !strings.Contains(r.LastError.Cause, "certificate signed by unknown authority") || r.LastHour.OriginRequests != 3 {
		t.Errorf("open breaker: %+v (last error %+v), want the certificate error kept and the 3 requests sent counted", r, r.LastError)
	}

	// The window slides: 59 minutes later the counts of the first
	// minute are gone, an hour after the last they all are.
	now = now.Add(59 * time.Minute)
	if got := w.Rows()[0].LastHour; got.OriginRequests != 2 || got.OriginFailures != 1 {
		t.Errorf("59 minutes on: %+v, want the second minute's 2 requests", got)
	}
	now = now.Add(time.Minute)
	if got := w.Rows()[0].LastHour; got != (proxy.OriginCounts{}) {
		t.Errorf("an hour on: %+v, want nothing", got)
	}
}

// TestCount counts the clients' requests by the origin their
// path names, downloads by the cache header their answer carries, and
// ignores other paths and origins that are not allowed, whatever their
// number.
func TestCount(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	w, err := New([]string{"registry.terraform.io"}, fakeCircuits{}, nil, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	h := w.Count(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if c := r.URL.Query().Get("cache"); c != "" {
			rw.Header().Set("X-Tfmirror-Cache", c)
		}
	}))
	for _, path := range []string{
		"/registry.terraform.io/hashicorp/random/index.json",
		"/registry.terraform.io/hashicorp/random/3.6.0.json",
		"/registry.terraform.io/hashicorp/random/terraform-provider-random_3.6.0_linux_amd64.zip?cache=hit",
		"/Registry.Terraform.IO/hashicorp/random/terraform-provider-random_3.6.0_linux_amd64.zip?cache=miss",
		"/registry/registry.terraform.io/v1/providers/hashicorp/random/versions",
		"/registry/registry.terraform.io/v1/modules/hashicorp/consul/aws/versions",
		"/", "/metrics", "/healthz",
		"/registry.opentofu.org/hashicorp/random/index.json",
	} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, path, nil))
	}
	for i := range 1000 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, fmt.Sprintf("/host-%d.example/a/b/index.json", i), nil))
	}
	got := w.Rows()[0].LastHour
	if got.Requests != 6 || got.Downloads != 2 || got.CacheHits != 1 {
		t.Errorf("counts %+v, want 6 requests, 2 downloads, 1 hit", got)
	}
	if len(w.origins) != 1 {
		t.Errorf("the watch keeps %d origins", len(w.origins))
	}
}

// TestRowsProxyFault: a request the upstream proxy refused (the
// mirror's credentials, the host by its policy) or failed (a broken
// SOCKS5 protocol) never reached the origin: the origin's row says the
// upstream proxy fails its requests, with the proxy's cause, not that
// the origin is failing, and counts no request to the origin and no
// failure of it. A refusal that is the origin's (the proxy could not
// reach it) is the origin failing; a success after either is the
// origin answering again.
func TestRowsProxyFault(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	w, err := New([]string{"registry.terraform.io"}, fakeCircuits{}, nil, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	oe := func(pe *discovery.ProxyError) error {
		return &discovery.OriginError{Host: "registry.terraform.io", Op: discovery.OpVersions, Err: pe}
	}
	w.OriginDone("registry.terraform.io", discovery.OpVersions, nil)
	for _, tc := range []struct {
		name  string
		err   error
		cause string
	}{
		{"407", oe(&discovery.ProxyError{Target: "registry.terraform.io:443", StatusCode: 407}), "refused the mirror's credentials"},
		{"SOCKS5 ruleset", oe(&discovery.ProxyError{Target: "registry.terraform.io:443", SOCKS: discovery.SOCKSNotAllowed}), "its policy"},
		{"SOCKS5 broken", oe(&discovery.ProxyError{Target: "registry.terraform.io:443", Broken: "unexpected protocol version 72"}), "broke the SOCKS5 protocol"},
	} {
		now = now.Add(time.Second)
		w.OriginDone("registry.terraform.io", discovery.OpVersions, tc.err)
		r := w.Rows()[0]
		if r.State != "proxy" || r.LastError == nil || !strings.HasPrefix(r.LastError.Cause, "the upstream proxy") ||
			!strings.Contains(r.LastError.Cause, tc.cause) {
			t.Errorf("%s: the origin's row is %+v (last error %+v), want the state proxy and the proxy's cause", tc.name, r, r.LastError)
		}
		if r.LastHour.OriginRequests != 1 || r.LastHour.OriginFailures != 0 {
			t.Errorf("%s: counts %+v, want the one request that reached the origin and no failure of it", tc.name, r.LastHour)
		}
	}
	now = now.Add(time.Second)
	w.OriginDone("registry.terraform.io", discovery.OpVersions, oe(&discovery.ProxyError{Target: "registry.terraform.io:443", StatusCode: 502}))
	if r := w.Rows()[0]; r.State != "failing" || r.LastHour.OriginFailures != 1 {
		t.Errorf("after the proxy's 502: %+v, want the origin failing", r)
	}
	now = now.Add(time.Second)
	w.OriginDone("registry.terraform.io", discovery.OpVersions, nil)
	if r := w.Rows()[0]; r.State != "ok" {
		t.Errorf("after a success: %+v", r)
	}
}

// TestCause words the failures an operator meets.
func TestCause(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	oe := func(err error) error { return &discovery.OriginError{Host: "h", Op: discovery.OpVersions, Err: err} }
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"unknown CA", oe(&tlsVerifyError{x509.UnknownAuthorityError{}}), "certificate signed by unknown authority"},
		{"wrong name", oe(x509.HostnameError{Certificate: &x509.Certificate{}, Host: "registry.example"}), "not valid for the origin's host name (registry.example)"},
		{"dns", oe(&net.DNSError{Err: "no such host", Name: "registry.example", IsNotFound: true}), "DNS: the host name registry.example does not resolve"},
		{"refused", oe(&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), "connection refused"},
		{"proxy", oe(&net.OpError{Op: "proxyconnect", Err: errors.New("dial tcp 10.0.0.1:3128: i/o timeout")}), "upstream proxy (upstream_proxy, --upstream-proxy, or HTTPS_PROXY)"},
		{"proxy credentials", oe(&discovery.ProxyError{Target: "registry.example:443", StatusCode: 407}), "the upstream proxy (upstream_proxy, --upstream-proxy, or HTTPS_PROXY) refused the mirror's credentials (HTTP 407 Proxy Authentication Required)"},
		{"proxy policy", oe(&discovery.ProxyError{Target: "registry.example:443", StatusCode: 403}), "the upstream proxy (upstream_proxy, --upstream-proxy, or HTTPS_PROXY) refused to connect to the origin (HTTP 403 Forbidden): its policy"},
		{"proxy tunnel", oe(&discovery.ProxyError{Target: "registry.example:443", StatusCode: 502}), "the upstream proxy (upstream_proxy, --upstream-proxy, or HTTPS_PROXY) could not connect to the origin (HTTP 502 Bad Gateway)"},
		{"socks credentials", oe(&discovery.ProxyError{Target: "registry.example:443", SOCKS: discovery.SOCKSAuthFailed}), "the upstream proxy (upstream_proxy, --upstream-proxy, or HTTPS_PROXY) refused the mirror's credentials (SOCKS5 username/password authentication failed)"},
		{"socks no method", oe(&discovery.ProxyError{Target: "registry.example:443", SOCKS: discovery.SOCKSNoAcceptableAuth}), "the upstream proxy (upstream_proxy, --upstream-proxy, or HTTPS_PROXY) refused the mirror's credentials (SOCKS5 no acceptable authentication methods)"},
		{"socks policy", oe(&discovery.ProxyError{Target: "registry.example:443", SOCKS: discovery.SOCKSNotAllowed}), "the upstream proxy (upstream_proxy, --upstream-proxy, or HTTPS_PROXY) refused to connect to the origin (SOCKS5 connection not allowed by ruleset): its policy"},
		{"socks tunnel", oe(&discovery.ProxyError{Target: "registry.example:443", SOCKS: "host unreachable"}), "the upstream proxy (upstream_proxy, --upstream-proxy, or HTTPS_PROXY) could not connect to the origin (SOCKS5 host unreachable)"},
		{"socks broken", oe(&discovery.ProxyError{Target: "registry.example:443", Broken: "unexpected protocol version 72"}), "the upstream proxy (upstream_proxy, --upstream-proxy, or HTTPS_PROXY) broke the SOCKS5 protocol (unexpected protocol version 72): check that upstream_proxy names a SOCKS5 proxy"},
		{"http broken", oe(&discovery.ProxyError{Target: "registry.example:443", Connect: true, Broken: "its answer to CONNECT is not an HTTP response"}), "the upstream proxy (upstream_proxy, --upstream-proxy, or HTTPS_PROXY) broke the HTTP protocol (its answer to CONNECT is not an HTTP response): check that upstream_proxy or HTTPS_PROXY names an HTTP proxy"},
		{"proxy unreachable", oe(&discovery.ProxyError{Target: "registry.example:443", Unreachable: "connection refused",
			Err: &net.OpError{Op: "proxyconnect", Net: "tcp", Err: &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}}),
			"the upstream proxy (upstream_proxy, --upstream-proxy, or HTTPS_PROXY) refused the connection: nothing listens on its port"},
		{"proxy certificate", oe(&discovery.CertificateError{Host: "h", Proxy: true, Cause: "signed by an unknown authority",
			Err: &net.OpError{Op: "proxyconnect", Net: "tcp", Err: &tlsVerifyError{x509.UnknownAuthorityError{}}}}),
			"the upstream proxy (upstream_proxy, --upstream-proxy, or HTTPS_PROXY) presents a TLS certificate the mirror does not trust: signed by an unknown authority; set origin_ca_file to its CA"},
		{"timeout", oe(context.DeadlineExceeded), "timeout"},
		{"status", &discovery.OriginError{Host: "h", Op: discovery.OpVersions, StatusCode: 502, Err: errors.New(`unexpected HTTP status "502 Bad Gateway"`)}, "the origin answered HTTP 502 Bad Gateway"},
		{"private", fmt.Errorf("%w: 10.0.0.1", discovery.ErrPrivateAddress), "allow_private_origins"},
		{"breaker", oe(&discovery.CircuitOpenError{Failures: 5, RetryAfter: 30 * time.Second}), "circuit breaker open after 5 failures in a row: requests fail fast until 12:00:30 UTC"},
		{"other", oe(errors.New(`package of registry.terraform.io/acmecorp/secretproject 1.0.0: download_url "http://x.example/a.zip" is not an https URL`)), "the request failed; its error says how"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Cause(tc.err, now)
			if !strings.Contains(got, tc.want) {
				t.Errorf("Cause(%v) = %q, want it to say %q", tc.err, got, tc.want)
			}
			// Shown to everyone: nothing of the request it failed.
			if strings.Contains(got, "acmecorp") || strings.Contains(got, "x.example") {
				t.Errorf("Cause(%v) = %q names what the request asked for", tc.err, got)
			}
		})
	}
}

// tlsVerifyError wraps an x509 error as crypto/tls does.
type tlsVerifyError struct{ err error }

func (e *tlsVerifyError) Error() string { return "tls: failed to verify certificate: " + e.err.Error() }
func (e *tlsVerifyError) Unwrap() error { return e.err }

// fakeRemembered is the engine's not-found answers as the watch reads them.
type fakeRemembered map[svchost.Hostname]int

func (f fakeRemembered) Entries(origin svchost.Hostname) int { return f[origin] }

// TestRowsNotFoundRemembered: each origin's row says how many of its
// not-found answers the engine holds, read when the rows are asked for.
func TestRowsNotFoundRemembered(t *testing.T) {
	remembered := fakeRemembered{"registry.terraform.io": 3}
	w, err := New([]string{"Registry.Terraform.io", "registry.opentofu.org"}, fakeCircuits{}, remembered, nil)
	if err != nil {
		t.Fatal(err)
	}
	rows := w.Rows()
	if len(rows) != 2 || rows[0].NotFoundRemembered != 3 || rows[1].NotFoundRemembered != 0 {
		t.Fatalf("rows %+v: want 3 remembered for registry.terraform.io, 0 for registry.opentofu.org", rows)
	}
	remembered["registry.opentofu.org"] = 1
	if rows := w.Rows(); rows[1].NotFoundRemembered != 1 {
		t.Fatalf("rows %+v: the count is not read again", rows)
	}
}

// TestModuleSourcesAreNotTheOrigin: a module package's fetch from the
// host its download location names (a module's publisher's choice on a
// public registry) says nothing of the origin's health, as the circuit
// breaker has it: a failing source host, one naming a private address
// included, neither marks the origin failing nor gives its row a cause
// that tells the operator to allow private origins, and its requests are
// not counted as the origin's.
func TestModuleSourcesAreNotTheOrigin(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	w, err := New([]string{"registry.terraform.io"}, fakeCircuits{}, nil, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	for _, cause := range []error{
		fmt.Errorf("%w: 10.0.0.1", discovery.ErrPrivateAddress),
		errors.New("HTTP 500"),
	} {
		w.OriginDone("registry.terraform.io", discovery.OpModuleSource,
			&discovery.OriginError{Host: "registry.terraform.io", DownloadHost: "git.attacker.example", Op: discovery.OpModuleSource, Err: cause})
	}
	r := w.Rows()[0]
	if r.State != "unused" || r.LastError != nil || r.LastHour.OriginRequests != 0 || r.LastHour.OriginFailures != 0 {
		t.Fatalf("after failed module source fetches: %+v (last error %+v), want the origin's row untouched", r, r.LastError)
	}
}

// TestCauseNamesNoUpstreamProxy: the cause is shown to everyone, also
// without a token when client authentication is on, while the
// configuration that names the upstream proxy is not: a failing upstream
// proxy is named as the setting, never by its address or host name (an
// internal one), and one whose host name does not resolve is not taken
// for the origin's DNS failing.
func TestCauseNamesNoUpstreamProxy(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String() // nothing listens there once closed
	ln.Close()
	_, port, _ := net.SplitHostPort(closed)
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: closed})}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://registry.example/.well-known/terraform.json", nil)
	_, refused := tr.RoundTrip(req)
	if refused == nil {
		t.Fatal("a request through a proxy nothing listens for succeeded")
	}
	unresolved := &net.OpError{Op: "proxyconnect", Net: "tcp", Err: &net.OpError{Op: "dial", Net: "tcp",
		Err: &net.DNSError{Err: "no such host", Name: "proxy.corp.internal", IsNotFound: true}}}
	for _, tc := range []struct {
		name   string
		err    error
		hidden []string
	}{
		{"refused", refused, []string{"127.0.0.1", port}},
		{"unresolved", unresolved, []string{"proxy.corp.internal", "DNS"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Cause(&discovery.OriginError{Host: "registry.example", Op: discovery.OpDiscovery, Err: tc.err}, now)
			if !strings.Contains(got, "upstream proxy (upstream_proxy, --upstream-proxy, or HTTPS_PROXY)") {
				t.Errorf("Cause(%v) = %q, want it to name the upstream proxy's setting", tc.err, got)
			}
			for _, h := range tc.hidden {
				if strings.Contains(got, h) {
					t.Errorf("Cause(%v) = %q, names %q", tc.err, got, h)
				}
			}
		})
	}
}

// TestCauseNamesNoDNSServer: a lookup that failed because the DNS server
// could not be asked is said without the resolver's own words, which name
// the mirror's address and the DNS server's (an internal one): the cause
// is shown to everyone who reaches the status page.
func TestCauseNamesNoDNSServer(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := pc.LocalAddr().String() // nothing reads there once closed
	pc.Close()
	_, port, _ := net.SplitHostPort(closed)
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", closed)
	}}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, lookupErr := r.LookupHost(ctx, "registry.example")
	var dnsErr *net.DNSError
	if !errors.As(lookupErr, &dnsErr) || !strings.Contains(dnsErr.Err, "127.0.0.1") {
		// A host that does not ask DNS (hosts: files): the resolver's
		// error as it is where it does.
		t.Logf("the lookup did not ask the DNS server: %v", lookupErr)
		lookupErr = &net.DNSError{Err: "read udp 127.0.0.1:40000->" + closed + ": read: connection refused",
			Name: "registry.example", Server: closed, IsTemporary: true}
	}
	got := Cause(&discovery.OriginError{Host: "registry.example", Op: discovery.OpDiscovery, Err: lookupErr}, now)
	t.Logf("error %q, cause %q", lookupErr, got)
	if !strings.Contains(got, "DNS") || !strings.Contains(got, "registry.example") {
		t.Errorf("Cause = %q, want it to say the lookup of registry.example failed", got)
	}
	for _, h := range []string{"127.0.0.1", port} {
		if strings.Contains(got, h) {
			t.Errorf("Cause = %q names %q", got, h)
		}
	}
	// The resolver's own sentences are repeated.
	got = Cause(&discovery.OriginError{Host: "h", Err: &net.DNSError{Err: "server misbehaving", Name: "registry.example", Server: "10.0.0.53:53"}}, now)
	if want := "DNS: the lookup of registry.example failed: server misbehaving"; got != want {
		t.Errorf("Cause = %q, want %q", got, want)
	}
}
