package discovery

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

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
			obs := &discoveryCounter{}
			c := newTestClient(t, s, func(cfg *Config) {
				cfg.Observer = obs
				cfg.Proxy = http.ProxyURL(proxyURL)
				cfg.Retries = 2
				cfg.BreakerThreshold = 3
				cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			})

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
			obs := &discoveryCounter{}
			c := newTestClient(t, s, func(cfg *Config) {
				cfg.Observer = obs
				cfg.Proxy = http.ProxyURL(&url.URL{Scheme: "socks5", Host: proxySrv.Addr})
				cfg.Retries = 2
				cfg.BreakerThreshold = 3
			})
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
