package discovery

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
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
			obs := &discoveryCounter{}
			c := newTestClient(t, s, func(cfg *Config) {
				cfg.Observer = obs
				cfg.Proxy = http.ProxyURL(proxyURL)
				cfg.Retries = 2
				cfg.BreakerThreshold = 3
				cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			})

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
