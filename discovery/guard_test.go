package discovery

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/leakcheck"
)

func TestMain(m *testing.M) {
	// disco logs its debug lines through the standard logger; keep test
	// output readable. (Redirecting it in the program is the caller's job.)
	log.SetOutput(io.Discard)
	leakcheck.Main(m)
}

func TestIsPublicAddr(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		// IPv4 public
		{"8.8.8.8", true},
		{"1.1.1.1", true},
		{"100.63.255.255", true},
		{"100.128.0.1", true},
		{"172.15.255.255", true},
		{"172.32.0.1", true},
		{"192.169.0.1", true},
		{"223.255.255.254", true},
		// IPv4 not public
		{"0.0.0.0", false},
		{"0.1.2.3", false},
		{"10.1.2.3", false},
		{"100.64.0.1", false},
		{"100.127.255.255", false},
		{"127.0.0.1", false},
		{"127.255.255.254", false},
		{"169.254.169.254", false},
		{"172.16.0.1", false},
		{"172.31.255.255", false},
		{"192.0.0.8", false},
		{"192.0.2.1", false},
		{"192.168.1.1", false},
		{"198.18.0.1", false},
		{"198.51.100.7", false},
		{"203.0.113.9", false},
		{"224.0.0.1", false},
		{"239.255.255.250", false},
		{"240.0.0.1", false},
		{"255.255.255.255", false},
		// IPv6 public
		{"2606:4700::1", true},
		{"2001:4860:4860::8888", true},
		{"2a00:1450:4001:80b::200e", true},
		// IPv6 not public
		{"::", false},
		{"::1", false},
		{"fc00::1", false},
		{"fd12:3456:789a::1", false},
		{"fe80::1", false},
		{"fe80::1%eth0", false},
		{"fec0::1", false},
		{"ff02::1", false},
		{"ff0e::1", false},
		{"100::1", false},
		{"2001:db8::1", false},
		{"2001::1", false}, // Teredo
		{"3fff::1", false},
		{"5f00::1", false},
		// IPv4 inside IPv6
		{"::ffff:127.0.0.1", false},
		{"::ffff:10.0.0.1", false},
		{"::ffff:169.254.169.254", false},
		{"::ffff:8.8.8.8", true},
		{"::127.0.0.1", false}, // IPv4-compatible (deprecated)
		{"64:ff9b::8.8.8.8", true},
		{"64:ff9b::10.0.0.1", false},
		{"64:ff9b::127.0.0.1", false},
		{"64:ff9b:1::1", false},
		{"2002:808:808::1", true},
		{"2002:7f00:1::1", false},
		{"2002:a9fe:a9fe::1", false},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			a := netip.MustParseAddr(tt.addr)
			if got := IsPublicAddr(a); got != tt.want {
				t.Fatalf("IsPublicAddr(%s) = %v, want %v", tt.addr, got, tt.want)
			}
		})
	}
	if IsPublicAddr(netip.Addr{}) {
		t.Fatal("the zero Addr is public")
	}
}

func TestGuardRefusesPrivateAddresses(t *testing.T) {
	s := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, discoveryDoc("/v1/providers/"))
	}))
	c := newTestClient(t, s, func(cfg *Config) { cfg.AllowPrivate = false })
	p := testProvider(s)
	ctx := context.Background()

	tests := []struct {
		name string
		op   string
		call func() error
	}{
		{"discovery", OpDiscovery, func() error { _, err := c.ProvidersURL(ctx, s.host); return err }},
		{"versions", OpDiscovery, func() error { _, err := c.Versions(ctx, p); return err }},
		{"document", OpShasums, func() error { _, err := c.FetchDocument(ctx, p, s.url("/SHA256SUMS"), 1024); return err }},
		{"archive", OpArchive, func() error { _, _, err := c.OpenArchive(ctx, p, s.url("/a.zip")); return err }},
		{"archive by name", OpArchive, func() error {
			// "localhost" resolves to loopback: the check is on the resolved address.
			u, _ := url.Parse(s.url("/a.zip"))
			u.Host = "localhost:" + u.Port()
			_, _, err := c.OpenArchive(ctx, p, u.String())
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, ErrPrivateAddress) {
				t.Fatalf("err = %v, want ErrPrivateAddress", err)
			}
			if !strings.Contains(err.Error(), "allow_private_origins") {
				t.Errorf("%q does not name the setting that allows private addresses", err)
			}
			oe := wantOriginError(t, err, tt.op, 0)
			if oe.Host != string(s.host) {
				t.Fatalf("OriginError.Host = %q, want %q", oe.Host, s.host)
			}
		})
	}
	if n := s.total(); n != 0 {
		t.Fatalf("server saw %d requests, want 0", n)
	}
}

// connectRecorder is an HTTP proxy that records CONNECT targets and refuses
// them all.
type connectRecorder struct {
	mu      sync.Mutex
	targets []string
}

func (p *connectRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.targets = append(p.targets, r.Host)
	p.mu.Unlock()
	http.Error(w, "refused by test proxy", http.StatusForbidden)
}

func (p *connectRecorder) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.targets...)
}

func TestGuardWithProxy(t *testing.T) {
	rec := &connectRecorder{}
	proxySrv := httptest.NewServer(rec) // on loopback: the proxy itself may be private
	t.Cleanup(proxySrv.Close)
	proxyURL, _ := url.Parse(proxySrv.URL)
	s := newTestServer(t, http.NotFoundHandler())
	c := newTestClient(t, s, func(cfg *Config) {
		cfg.AllowPrivate = false
		cfg.Proxy = http.ProxyURL(proxyURL)
		cfg.Retries = -1 // count CONNECTs one to one
	})
	p := testProvider(s)

	// A private target is refused before anything reaches the proxy.
	_, _, err := c.OpenArchive(context.Background(), p, s.url("/a.zip"))
	if !errors.Is(err, ErrPrivateAddress) {
		t.Fatalf("private target through proxy: err = %v, want ErrPrivateAddress", err)
	}
	if got := rec.seen(); len(got) != 0 {
		t.Fatalf("proxy saw %v for a private target", got)
	}

	// A public target goes through the (private) proxy.
	_, _, err = c.OpenArchive(context.Background(), p, "https://8.8.8.8/a.zip")
	if err == nil || errors.Is(err, ErrPrivateAddress) {
		t.Fatalf("public target through proxy: err = %v, want the proxy's refusal", err)
	}
	wantOriginError(t, err, OpArchive, 0)
	if got := rec.seen(); len(got) != 1 || got[0] != "8.8.8.8:443" {
		t.Fatalf("proxy saw %v, want [8.8.8.8:443]", got)
	}
}

// TestGuardWithProxyRefusesNumericHosts: through a proxy the target is
// checked before the proxy is asked; host spellings that are not a
// canonical IP address to Go but are one to the proxy's resolver
// (inet_aton's short, decimal, octal and hexadecimal forms, a trailing
// dot) are refused too, not passed on as names that did not resolve here.
func TestGuardWithProxyRefusesNumericHosts(t *testing.T) {
	rec, proxyURL := recordingProxy(t)
	s := newTestServer(t, http.NotFoundHandler())
	c := proxiedClient(t, s, proxyURL)
	p := testProvider(s)
	for _, host := range []string{
		"127.1",               // 127.0.0.1
		"2130706433",          // 127.0.0.1
		"0x7f000001",          // 127.0.0.1
		"0177.0.0.1",          // 127.0.0.1
		"017700000001",        // 127.0.0.1
		"169.254.43518",       // 169.254.169.254
		"0xa9.0xfe.0xa9.0xfe", // 169.254.169.254
		"127.0.0.1.",          // trailing dot
		"169.254.169.254.",    // trailing dot
		"10.0.0.1.",
	} {
		t.Run(host, func(t *testing.T) {
			before := len(rec.seen())
			_, _, err := c.OpenArchive(context.Background(), p, "https://"+host+"/a.zip")
			if !errors.Is(err, ErrPrivateAddress) {
				t.Errorf("err = %v, want ErrPrivateAddress", err)
			}
			if got := rec.seen()[before:]; len(got) != 0 {
				t.Fatalf("the proxy was asked for %v", got)
			}
		})
	}
}

// TestGuardProxyExemptionOnlyForProxiedConnections: the guard lets the
// mirror connect to the proxy (often private) for the requests it sends
// through it, and for nothing else: a URL naming the proxy's own address,
// which the proxy rules send direct (NO_PROXY), is a private address like
// any other.
func TestGuardProxyExemptionOnlyForProxiedConnections(t *testing.T) {
	var (
		mu     sync.Mutex
		direct []string
	)
	rec := &connectRecorder{}
	proxySrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			mu.Lock()
			direct = append(direct, r.URL.Path)
			mu.Unlock()
			w.Write([]byte("the proxy's own page"))
			return
		}
		rec.ServeHTTP(w, r)
	}))
	t.Cleanup(proxySrv.Close)
	proxyURL, _ := url.Parse(proxySrv.URL)
	s := newTestServer(t, http.NotFoundHandler())
	c := newTestClient(t, s, func(cfg *Config) {
		cfg.AllowPrivate = false
		cfg.RootCAs.AddCert(proxySrv.Certificate())
		// As NO_PROXY naming the proxy's host: everything else goes through it.
		cfg.Proxy = func(r *http.Request) (*url.URL, error) {
			if r.URL.Host == proxyURL.Host {
				return nil, nil
			}
			return proxyURL, nil
		}
		cfg.Retries = -1
		cfg.BreakerThreshold = -1
	})
	p := testProvider(s)
	ctx := context.Background()

	// A public target goes through the (private) proxy.
	if _, _, err := c.OpenArchive(ctx, p, "https://8.8.8.8/a.zip"); err == nil || errors.Is(err, ErrPrivateAddress) {
		t.Fatalf("public target through the proxy: err = %v, want the proxy's refusal", err)
	}
	if got := rec.seen(); len(got) != 1 {
		t.Fatalf("the proxy saw %v, want one CONNECT", got)
	}
	// The proxy's address, sent direct, is refused.
	_, _, err := c.OpenArchive(ctx, p, proxySrv.URL+"/admin")
	if !errors.Is(err, ErrPrivateAddress) {
		t.Errorf("the proxy's address, direct: err = %v, want ErrPrivateAddress", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(direct) != 0 {
		t.Fatalf("the proxy answered %v as an origin", direct)
	}
}

// TestGuardWithProxyResolvesTarget: through a proxy, which resolves and
// connects to the target itself, a target name that resolves on the
// mirror to a non-public address (any of its addresses) is refused before
// the proxy is asked; a name that resolves to public addresses, one that
// does not resolve here (a sealed network where only the proxy resolves
// names), and one whose resolution does not answer within
// targetLookupTimeout go to the proxy, which decides.
func TestGuardWithProxyResolvesTarget(t *testing.T) {
	rec, proxyURL := recordingProxy(t)
	s := newTestServer(t, http.NotFoundHandler())
	var (
		mu        sync.Mutex
		deadlines = map[string]time.Duration{}
	)
	c := newTestClient(t, s, func(cfg *Config) {
		cfg.AllowPrivate = false
		cfg.Proxy = http.ProxyURL(proxyURL)
		cfg.Retries = -1
		cfg.BreakerThreshold = -1
		cfg.LookupNetIP = func(ctx context.Context, _, host string) ([]netip.Addr, error) {
			if d, ok := ctx.Deadline(); ok {
				mu.Lock()
				deadlines[host] = time.Until(d)
				mu.Unlock()
			}
			switch host {
			case "private.example":
				return []netip.Addr{netip.MustParseAddr("10.0.0.5")}, nil
			case "metadata.example":
				return []netip.Addr{netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("169.254.169.254")}, nil
			case "mapped.example":
				return []netip.Addr{netip.MustParseAddr("::ffff:127.0.0.1")}, nil
			case "public.example":
				return []netip.Addr{netip.MustParseAddr("8.8.8.8")}, nil
			case "slow.example":
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
	})
	p := testProvider(s)
	for _, host := range []string{"private.example", "metadata.example", "mapped.example"} {
		t.Run(host, func(t *testing.T) {
			before := len(rec.seen())
			_, _, err := c.OpenArchive(context.Background(), p, "https://"+host+"/a.zip")
			if !errors.Is(err, ErrPrivateAddress) {
				t.Errorf("err = %v, want ErrPrivateAddress", err)
			}
			if got := rec.seen()[before:]; len(got) != 0 {
				t.Errorf("the proxy was asked for %v", got)
			}
		})
	}
	for _, host := range []string{"public.example", "sealed.example", "slow.example"} {
		t.Run(host, func(t *testing.T) {
			before := len(rec.seen())
			start := time.Now()
			_, _, err := c.OpenArchive(context.Background(), p, "https://"+host+"/a.zip")
			if err == nil || errors.Is(err, ErrPrivateAddress) {
				t.Errorf("err = %v, want the proxy's refusal", err)
			}
			if got := rec.seen()[before:]; len(got) != 1 || got[0] != host+":443" {
				t.Errorf("the proxy saw %v, want [%s:443]", got, host)
			}
			if took := time.Since(start); took > targetLookupTimeout+10*time.Second {
				t.Errorf("took %v", took)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if d, ok := deadlines["slow.example"]; !ok || d > targetLookupTimeout {
		t.Errorf("the slow lookup's deadline: %v (set %v), want at most %v", d, ok, targetLookupTimeout)
	}
}

// TestGuardProxyNamedInAnyCase: the proxy's own (private) address is let
// past the guard for the requests sent through it however its URL spells
// the host's case: net/http dials the host as the URL spells it, and
// host names do not differ by case.
func TestGuardProxyNamedInAnyCase(t *testing.T) {
	rec := &connectRecorder{}
	proxySrv := httptest.NewServer(rec)
	t.Cleanup(proxySrv.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(proxySrv.URL, "http://"))
	s := newTestServer(t, http.NotFoundHandler())
	for _, host := range []string{"localhost", "LOCALHOST", "LocalHost"} {
		t.Run(host, func(t *testing.T) {
			proxyURL, _ := url.Parse("http://" + net.JoinHostPort(host, port))
			c := proxiedClient(t, s, proxyURL)
			before := len(rec.seen())
			_, _, err := c.OpenArchive(context.Background(), testProvider(s), "https://8.8.8.8/a.zip")
			if err == nil || errors.Is(err, ErrPrivateAddress) {
				t.Fatalf("public target through the proxy %s: err = %v, want the proxy's refusal", proxyURL.Host, err)
			}
			if got := rec.seen(); len(got) != before+1 {
				t.Fatalf("the proxy saw %v, want one more CONNECT", got)
			}
		})
	}
}

// TestGuardWithProxyRefusesHostsSpelledInUnicode: net/http names a
// proxied target to the proxy by its host's IDNA ASCII form, which maps
// full-width letters, digits and dots, and the ideographic full stop, to
// ASCII: a host spelled so is checked as the proxy is asked for it, not
// as a name that did not resolve here.
func TestGuardWithProxyRefusesHostsSpelledInUnicode(t *testing.T) {
	rec, proxyURL := recordingProxy(t)
	s := newTestServer(t, http.NotFoundHandler())
	c := proxiedClient(t, s, proxyURL)
	p := testProvider(s)
	for _, host := range []string{
		"ｌｏｃａｌｈｏｓｔ",       // localhost
		"１２７．０．０．１",       // 127.0.0.1
		"１６９．２５４．１６９．２５４", // 169.254.169.254
		"169。254。169。254", // ideographic full stops
		"１２７．１",           // 127.1
		"ＬＯＣＡＬＨＯＳＴ",       // LOCALHOST
	} {
		t.Run(host, func(t *testing.T) {
			// A provider's download URL, and a module's source location
			// as package modsource gives it (the host escaped).
			escaped := (&url.URL{Scheme: "https", Host: host, Path: "/a.tar.gz"}).String()
			for _, open := range []func() error{
				func() error {
					_, _, err := c.OpenArchive(context.Background(), p, "https://"+host+"/a.zip")
					return err
				},
				func() error { _, _, err := c.OpenSource(context.Background(), p.Hostname, escaped); return err },
			} {
				before := len(rec.seen())
				err := open()
				if got := rec.seen()[before:]; len(got) != 0 {
					t.Fatalf("the proxy was asked for %v (err %v)", got, err)
				}
				if !errors.Is(err, ErrPrivateAddress) {
					t.Errorf("err = %v, want ErrPrivateAddress", err)
				}
			}
		})
	}
}

// recordingProxy is an HTTP proxy on loopback (the proxy itself may be
// private) that records the CONNECTs it is asked for, and its URL.
func recordingProxy(t *testing.T) (*connectRecorder, *url.URL) {
	t.Helper()
	rec := &connectRecorder{}
	proxySrv := httptest.NewServer(rec)
	t.Cleanup(proxySrv.Close)
	proxyURL, _ := url.Parse(proxySrv.URL)
	return rec, proxyURL
}

// proxiedClient is a client of s through the proxy at proxyURL, with the
// private-address guard on, no retries (a CONNECT per request) and no
// circuit breaker (every host is tried).
func proxiedClient(t *testing.T, s *testServer, proxyURL *url.URL) *Client {
	t.Helper()
	return newTestClient(t, s, func(cfg *Config) {
		cfg.AllowPrivate = false
		cfg.Proxy = http.ProxyURL(proxyURL)
		cfg.Retries = -1
		cfg.BreakerThreshold = -1
	})
}
