package main

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/socks5test"
	"github.com/tfmirror/tfmirror/v2/proxy"
)

// TestUpstreamProxyRefusesCredentials: an upstream proxy that refuses the
// mirror's user and password gets the same answer whether it is an HTTP
// proxy (407 to CONNECT) or a SOCKS5 one (its authentication failed):
// every client request is a 502 whose body says the upstream proxy
// refuses the mirror's credentials, naming its settings, never its
// address or password; the origin's circuit breaker stays closed however
// many requests fail so (an outage's would open, and answer 503); the
// status page's row of the origin says the proxy refused the
// credentials, the origin failing at the upstream proxy, not failing
// itself; tfmirror_origin_requests_total counts the requests with the
// outcome "proxy", none with "error"; and the log says so at error
// level, without the address or the password. The same SOCKS5 proxy
// given the right password carries the requests.
func TestUpstreamProxyRefusesCredentials(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{})
	origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	route := func(hostport string) string {
		if host, _, _ := net.SplitHostPort(hostport); host == tfRegistry {
			return origin.Addr
		}
		return hostport
	}
	const index = tfRegistry + "/hashicorp/random/index.json"

	socks := socks5test.Start(t, socks5test.Options{User: "mirror", Pass: "s3cret-proxy-pass", Route: route})
	t.Run("SOCKS5 with the right password", func(t *testing.T) {
		u := url.URL{Scheme: "socks5", User: url.UserPassword("mirror", "s3cret-proxy-pass"), Host: socks.Addr}
		tm := startMirrorWith(t, origin, t.TempDir(), nil, &overrides{origin: fastRetries},
			"--allow-private-origins", "--upstream-proxy", u.String())
		if resp, body, err := tm.get(index); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("index.json through the SOCKS5 proxy: %v %v %s", resp, err, body)
		}
	})

	httpProxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Proxy-Authenticate", `Basic realm="proxy"`)
		http.Error(w, "credentials refused", http.StatusProxyAuthRequired)
	}))
	t.Cleanup(httpProxy.Close)
	httpAddr := strings.TrimPrefix(httpProxy.URL, "http://")
	for _, tc := range []struct{ name, scheme, addr string }{
		{"HTTP", "http", httpAddr},
		{"SOCKS5", "socks5", socks.Addr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs logbuf.Buffer
			u := url.URL{Scheme: tc.scheme, User: url.UserPassword("mirror", "s3cret-wrong-pass"), Host: tc.addr}
			tm := startMirrorWith(t, origin, t.TempDir(), &logs, &overrides{origin: fastRetries},
				"--allow-private-origins", "--upstream-proxy", u.String())
			// More requests than the breaker's threshold (5).
			for i := range 7 {
				resp, body, err := tm.get(index)
				if err != nil {
					t.Fatal(err)
				}
				wantJSONError(t, "request "+string(rune('1'+i)), resp, body, http.StatusBadGateway,
					"the upstream proxy (upstream_proxy, --upstream-proxy, or HTTPS_PROXY)", "refuses the mirror's credentials")
				for _, secret := range []string{tc.addr, "s3cret"} {
					if strings.Contains(string(body), secret) {
						t.Fatalf("the answer names %q: %s", secret, body)
					}
				}
			}
			failingAtTheProxy(t, tm, "the upstream proxy (upstream_proxy, --upstream-proxy, or HTTPS_PROXY) refused the mirror's credentials", 7)
			logged := logs.String()
			if !strings.Contains(logged, `"level":"ERROR","msg":"the upstream proxy refused the connection`) {
				t.Errorf("no error-level log line that the upstream proxy refused:\n%s", logged)
			}
			// The start names the proxy by its scheme and address, the
			// operator's choice; no line names the password, nor does
			// any line of the requests name the address.
			for line := range strings.Lines(logged) {
				for _, secret := range []string{tc.addr, "s3cret"} {
					if strings.Contains(line, secret) && (secret != tc.addr || !strings.Contains(line, "origin traffic goes through the upstream proxy")) {
						t.Errorf("a log line names %q: %s", secret, line)
					}
				}
			}
		})
	}
}

// TestUpstreamProxyBreaksSOCKS5: an upstream proxy named by a socks5://
// URL that answers what is not SOCKS5 (an HTTP proxy's answer) fails
// every client request with a 502 whose body says the upstream proxy,
// by its settings, broke the SOCKS5 protocol, never naming its address;
// the origin's circuit breaker stays closed however many requests fail
// so, the status page's row shows the origin failing at the upstream
// proxy, and tfmirror_origin_requests_total counts the requests with the
// outcome "proxy", none with "error".
func TestUpstreamProxyBreaksSOCKS5(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{})
	socks := socks5test.Start(t, socks5test.Options{Break: socks5test.Garbage})
	u := url.URL{Scheme: "socks5", Host: socks.Addr}
	tm := startMirrorWith(t, origin, t.TempDir(), nil, &overrides{origin: fastRetries},
		"--allow-private-origins", "--upstream-proxy", u.String())
	// More requests than the breaker's threshold (5).
	for i := range 7 {
		resp, body, err := tm.get(tfRegistry + "/hashicorp/random/index.json")
		if err != nil {
			t.Fatal(err)
		}
		wantJSONError(t, "request "+string(rune('1'+i)), resp, body, http.StatusBadGateway,
			"the upstream proxy (upstream_proxy, --upstream-proxy, or HTTPS_PROXY)", "broke the SOCKS5 protocol")
		if strings.Contains(string(body), socks.Addr) {
			t.Fatalf("the answer names the proxy's address: %s", body)
		}
	}
	failingAtTheProxy(t, tm, "broke the SOCKS5 protocol", 7)
}

// TestUpstreamProxyUnreachable: an upstream proxy nothing listens for,
// HTTP or SOCKS5, fails every client request with a 502 whose body says
// the upstream proxy, by its settings, could not be reached, never
// naming its address or the credentials of its URL (net/http's words,
// "proxyconnect tcp: dial tcp ADDR: connect: connection refused", named
// the operator's internal address to whoever asked). As the network
// down, it opens the origin's circuit breaker, which answers the
// requests after it at once (503, naming no proxy either); the status
// page's row shows the origin unavailable, its last error's cause the
// upstream proxy, and tfmirror_origin_requests_total counts the requests
// that tried the proxy with the outcome "proxy". The log says so at
// error level, with the proxy's address for the operator, never the
// password.
func TestUpstreamProxyUnreachable(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{})
	for _, scheme := range []string{"http", "socks5"} {
		t.Run(scheme, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String() // nothing listens there once closed
			ln.Close()
			var logs logbuf.Buffer
			u := url.URL{Scheme: scheme, User: url.UserPassword("mirror", "s3cret-proxy-pass"), Host: addr}
			tm := startMirrorWith(t, origin, t.TempDir(), &logs, &overrides{origin: fastRetries},
				"--allow-private-origins", "--upstream-proxy", u.String())
			// Requests until the breaker (threshold 5) opens, each of a
			// few attempts.
			var proxied float64
			for i := range 7 {
				resp, body, err := tm.get(tfRegistry + "/hashicorp/random/index.json")
				if err != nil {
					t.Fatal(err)
				}
				for _, secret := range []string{addr, "s3cret", "proxyconnect"} {
					if strings.Contains(string(body), secret) {
						t.Fatalf("the answer names %q: %s", secret, body)
					}
				}
				if resp.StatusCode == http.StatusServiceUnavailable {
					break
				}
				wantJSONError(t, "request "+string(rune('1'+i)), resp, body, http.StatusBadGateway,
					"the upstream proxy (upstream_proxy, --upstream-proxy, or HTTPS_PROXY) could not be reached", "connection refused")
				proxied++
			}
			if proxied == 0 || proxied == 7 {
				t.Fatalf("%v requests of 7 answered by the proxy's failure, want some, then the open breaker's 503", proxied)
			}
			rows := originRows(t, tm)
			if len(rows) != 1 || rows[0].Breaker != "open" || rows[0].State != "unavailable" || rows[0].LastError == nil ||
				!strings.Contains(rows[0].LastError.Cause, "the upstream proxy (upstream_proxy, --upstream-proxy, or HTTPS_PROXY) refused the connection: nothing listens on its port") {
				t.Errorf("the origin's row: %+v", rows)
			}
			tm.idle()
			if got := metric(t, tm.m.registry, "tfmirror_origin_requests_total", "origin", tfRegistry, "operation", "discovery", "outcome", "proxy"); got != proxied {
				t.Errorf("discoveries counted with outcome proxy: %v, want %v", got, proxied)
			}
			logged := logs.String()
			if !strings.Contains(logged, `"level":"ERROR","msg":"the upstream proxy could not be reached`) || !strings.Contains(logged, addr+": connect: connection refused") {
				t.Errorf("no error-level log line that the upstream proxy at %s could not be reached:\n%s", addr, logged)
			}
			if strings.Contains(logged, "s3cret") {
				t.Errorf("the log names the proxy's password:\n%s", logged)
			}
		})
	}
}

// failingAtTheProxy checks tm's status page and metrics after n requests
// for its one origin, each failed by the upstream proxy: the origin's
// row shows its circuit breaker closed, the origin failing at the
// upstream proxy, and a last error whose cause says cause;
// tfmirror_origin_requests_total counts the n discoveries with the
// outcome "proxy", none with "error".
func failingAtTheProxy(t *testing.T, tm *testMirror, cause string, n float64) {
	t.Helper()
	rows := originRows(t, tm)
	if len(rows) != 1 || rows[0].Breaker != "closed" || rows[0].State != "proxy" || rows[0].LastError == nil ||
		!strings.Contains(rows[0].LastError.Cause, cause) {
		t.Errorf("the origin's row: %+v", rows)
	}
	tm.idle()
	proxied := metric(t, tm.m.registry, "tfmirror_origin_requests_total", "origin", tfRegistry, "operation", "discovery", "outcome", "proxy")
	failed := metric(t, tm.m.registry, "tfmirror_origin_requests_total", "origin", tfRegistry, "operation", "discovery", "outcome", "error")
	if proxied != n || failed != 0 {
		t.Errorf("discoveries counted with outcome proxy %v and error %v, want %v and 0", proxied, failed, n)
	}
}

// originRows are the origins' rows of tm's status page.
func originRows(t *testing.T, tm *testMirror) []proxy.OriginHealth {
	t.Helper()
	_, body, err := tm.get("/?format=json")
	if err != nil {
		t.Fatal(err)
	}
	var st proxy.Status
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	return st.Origins
}
