package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// fastRetries keeps origin retries quick in tests.
func fastRetries(c *discovery.Config) {
	c.RetryBaseDelay = time.Millisecond
	c.RetryMaxDelay = 5 * time.Millisecond
}

// wantJSONError fails unless resp has status and a JSON error body
// containing every one of words.
func wantJSONError(t *testing.T, what string, resp *http.Response, body []byte, status int, words ...string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("%s: status %d, want %d: %s", what, resp.StatusCode, status, body)
	}
	var eb struct{ Errors []string }
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" || json.Unmarshal(body, &eb) != nil || len(eb.Errors) == 0 {
		t.Fatalf("%s: not a JSON error body (%s): %s", what, ct, body)
	}
	for _, w := range words {
		if !strings.Contains(eb.Errors[0], w) {
			t.Fatalf("%s: error %q does not mention %q", what, eb.Errors[0], w)
		}
	}
}

func TestOriginFailuresServeStale(t *testing.T) {
	huge := []byte(`{"versions":[` + strings.Repeat(`{"version":"1.0.0"},`, 200) + `{"version":"1.0.1"}]}`)
	tests := []struct {
		name       string
		inject     func(o *fakeorigin.Origin)
		coldStatus int // for a provider the mirror has never seen
	}{
		{"origin down (connection refused)", func(o *fakeorigin.Origin) { o.Close() }, http.StatusBadGateway},
		{"500", func(o *fakeorigin.Origin) { o.SetKindStatus(fakeorigin.Versions, 500) }, http.StatusBadGateway},
		{"429 with a long Retry-After", func(o *fakeorigin.Origin) {
			o.SetRetryAfter("3600")
			o.SetKindStatus(fakeorigin.Versions, 429)
		}, http.StatusServiceUnavailable},
		{"garbage body", func(o *fakeorigin.Origin) {
			o.SetKindBody(fakeorigin.Versions, []byte("<html>maintenance</html>"), "text/html")
		}, http.StatusBadGateway},
		{"JSON that is not an object", func(o *fakeorigin.Origin) {
			o.SetKindBody(fakeorigin.Versions, []byte(`["x"]`), "application/json")
		}, http.StatusBadGateway},
		{"oversize body", func(o *fakeorigin.Origin) {
			o.SetKindBody(fakeorigin.Versions, huge, "application/json")
		}, http.StatusBadGateway},
		{"timeout", func(o *fakeorigin.Origin) { o.SetLatency(time.Hour) }, http.StatusGatewayTimeout},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			origin := newOrigin(t, fakeorigin.Options{})
			origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
			origin.AddProvider("hashicorp", "null", []string{"3.2.0"}, []string{"linux_amd64"})
			tm := startMirrorWith(t, origin, t.TempDir(), nil, &overrides{
				dialContext: routeRegistryTo(origin),
				origin: func(c *discovery.Config) {
					fastRetries(c)
					c.MaxDocumentBytes = 1 << 10
					// Every answer before the failure must fit in
					// it on a loaded machine.
					c.RequestTimeout = time.Second
				},
			}, "--allow-private-origins", "--versions-ttl", "1ns")
			index := tfRegistry + "/hashicorp/random/index.json"
			if resp, body, err := tm.get(index); err != nil || resp.StatusCode != 200 {
				t.Fatalf("warming: %v %v %s", resp, err, body)
			}
			tc.inject(origin)

			resp, body, err := tm.get(index)
			if err != nil || resp.StatusCode != 200 || resp.Header.Get("X-Tfmirror-Stale") != "1" {
				t.Fatalf("cached index.json with a failing origin: %v %v %s", resp, err, body)
			}
			if !bytes.Contains(body, []byte(`"3.6.0"`)) {
				t.Fatalf("stale index.json lacks the cached version: %s", body)
			}
			expectMetrics(t, tm.m.registry, "after the stale answer",
				expectation{"tfmirror_stale_responses_total", []string{"kind", "versions"}, 1})

			// Never seen before: an upstream error, never 404.
			resp, body, err = tm.get(tfRegistry + "/hashicorp/null/index.json")
			if err != nil {
				t.Fatal(err)
			}
			wantJSONError(t, "uncached provider", resp, body, tc.coldStatus, tfRegistry)
		})
	}
}

func TestOriginNotFoundIsNotFoundEvenWhenCached(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{})
	origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	tm := startMirror(t, origin, t.TempDir(), nil, "--versions-ttl", "1ns")
	index := tfRegistry + "/hashicorp/random/index.json"
	if resp, body, err := tm.get(index); err != nil || resp.StatusCode != 200 {
		t.Fatalf("warming: %v %v %s", resp, err, body)
	}
	origin.SetKindStatus(fakeorigin.Versions, http.StatusNotFound)
	resp, body, err := tm.get(index)
	if err != nil {
		t.Fatal(err)
	}
	wantJSONError(t, "provider the origin says is gone", resp, body, http.StatusNotFound)
}

func TestCircuitBreakerFailsFastAndServesStale(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{})
	origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	origin.AddProvider("hashicorp", "null", []string{"3.2.0"}, []string{"linux_amd64"})
	tm := startMirror(t, origin, t.TempDir(), nil, "--versions-ttl", "1ns")
	index := tfRegistry + "/hashicorp/random/index.json"
	if resp, body, err := tm.get(index); err != nil || resp.StatusCode != 200 {
		t.Fatalf("warming: %v %v %s", resp, err, body)
	}
	origin.SetKindStatus(fakeorigin.Versions, http.StatusInternalServerError)
	origin.ResetHits()
	// Three attempts per request: the second request opens the circuit
	// (default threshold 5).
	for range 2 {
		if resp, body, err := tm.get(index); err != nil || resp.StatusCode != 200 {
			t.Fatalf("stale index.json: %v %v %s", resp, err, body)
		}
	}
	expectMetrics(t, tm.m.registry, "after five failures",
		expectation{"tfmirror_origin_circuit_open", []string{"origin", tfRegistry}, 1})
	hits := origin.TotalHits()
	if hits != 5 {
		t.Fatalf("origin saw %d requests, want 5 (then the circuit opens)", hits)
	}
	// Open: cached data is still served, nothing reaches the origin, and an
	// uncached provider fails fast with 503 naming the origin.
	if resp, body, err := tm.get(index); err != nil || resp.StatusCode != 200 || resp.Header.Get("X-Tfmirror-Stale") != "1" {
		t.Fatalf("stale index.json with the circuit open: %v %v %s", resp, err, body)
	}
	resp, body, err := tm.get(tfRegistry + "/hashicorp/null/index.json")
	if err != nil {
		t.Fatal(err)
	}
	wantJSONError(t, "uncached provider with the circuit open", resp, body, http.StatusServiceUnavailable, tfRegistry, "circuit breaker")
	// The default cooldown is 30s: the client is told when to come back.
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 30 {
		t.Fatalf("Retry-After %q with the circuit open, want 1..30 seconds", resp.Header.Get("Retry-After"))
	}
	if got := origin.TotalHits(); got != hits {
		t.Fatalf("origin saw %d more requests while the circuit was open", got-hits)
	}
}

func TestOriginRetryAndBreakerFlags(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{})
	origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	origin.SetKindStatus(fakeorigin.Versions, http.StatusInternalServerError)
	tm := startMirror(t, origin, t.TempDir(), nil,
		"--origin-retries", "0", "--origin-breaker-threshold", "2", "--origin-breaker-cooldown", "1h")
	index := tfRegistry + "/hashicorp/random/index.json"
	for i := range 2 {
		resp, body, err := tm.get(index)
		if err != nil {
			t.Fatal(err)
		}
		wantJSONError(t, "origin failing", resp, body, http.StatusBadGateway, tfRegistry)
		// Discovery succeeds once; each versions request is tried once.
		if got := origin.Hits(fakeorigin.Versions); got != i+1 {
			t.Fatalf("after request %d the origin saw %d versions requests, want %d (no retries)", i+1, got, i+1)
		}
	}
	resp, body, err := tm.get(index)
	if err != nil {
		t.Fatal(err)
	}
	wantJSONError(t, "circuit open after two failures", resp, body, http.StatusServiceUnavailable, "circuit breaker")
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 3500 || ra > 3600 {
		t.Fatalf("Retry-After %q, want about an hour (--origin-breaker-cooldown 1h)", resp.Header.Get("Retry-After"))
	}
	if got := origin.Hits(fakeorigin.Versions); got != 2 {
		t.Fatalf("the origin saw %d versions requests with the circuit open, want 2", got)
	}
}

// TestOriginLowSpeedLimit: an origin that drips an archive far below
// --origin-min-speed (but often enough never to stall for the idle
// timeout) is given up after about one --origin-min-speed-window instead
// of the hour-long archive limit, and counted as an origin timeout.
func TestOriginLowSpeedLimit(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{ArchiveSize: 4 << 10})
	origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	tm := startMirror(t, origin, t.TempDir(), nil,
		"--origin-min-speed", "1KiB", "--origin-min-speed-window", "300ms")
	for _, p := range []string{tfRegistry + "/hashicorp/random/index.json", tfRegistry + "/hashicorp/random/3.6.0.json"} {
		if resp, body, err := tm.get(p); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %v %v %.200s", p, resp, err, body)
		}
	}
	origin.SetArchiveRate(50) // bytes per second: 80 s for the archive
	start := time.Now()
	resp, body, err := tm.get(archiveURL("random", "3.6.0", "linux_amd64"))
	elapsed := time.Since(start)
	if err == nil && resp.StatusCode == http.StatusOK && len(body) == 4<<10 {
		t.Fatalf("the whole archive arrived after %s", elapsed)
	}
	if elapsed > 10*time.Second {
		t.Fatalf("the mirror gave up after %s, want about the 300ms window", elapsed)
	}
	tm.idle()
	if got := metric(t, tm.m.registry, "tfmirror_origin_requests_total",
		"origin", tfRegistry, "operation", "archive", "outcome", "timeout"); got != 1 {
		t.Fatalf("archive timeouts counted: %v, want 1", got)
	}
	// The next request starts a new download; at full speed it succeeds.
	origin.SetArchiveRate(0)
	if resp, body, err := tm.get(archiveURL("random", "3.6.0", "linux_amd64")); err != nil || resp.StatusCode != 200 || len(body) != 4<<10 {
		t.Fatalf("archive at full speed: %v %v (%d bytes)", resp, err, len(body))
	}
}

// TestAllowedOriginsReachTheOriginClient: --allowed-origins is the origin
// client's own rule, not only the proxy's early check. Asked directly for a
// provider of a host the flag leaves out (but which the client allows by
// default), the mirror's origin client refuses it without dialling.
func TestAllowedOriginsReachTheOriginClient(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{})
	origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	var (
		mu     sync.Mutex
		dialed []string
	)
	toOrigin := routeRegistryTo(origin)
	tm := startMirrorWith(t, origin, t.TempDir(), nil, &overrides{
		dialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if host, _, _ := net.SplitHostPort(addr); host != tfRegistry {
				mu.Lock()
				dialed = append(dialed, addr)
				mu.Unlock()
				return nil, fmt.Errorf("test dialer: no connections to %s", addr)
			}
			return toOrigin(ctx, network, addr)
		},
		origin: fastRetries,
	}, "--allow-private-origins")
	ctx := context.Background()
	tofu := addrs.Provider{Hostname: "registry.opentofu.org", Namespace: "hashicorp", Type: "random"}
	if _, err := tm.m.origin.Versions(ctx, tofu); !errors.Is(err, discovery.ErrHostNotAllowed) {
		t.Fatalf("Versions of %s with --allowed-origins %s: err = %v, want ErrHostNotAllowed", tofu, tfRegistry, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialed) != 0 {
		t.Fatalf("the origin client dialled %v for a host that is not allowed", dialed)
	}
	tf := addrs.Provider{Hostname: tfRegistry, Namespace: "hashicorp", Type: "random"}
	if _, err := tm.m.origin.Versions(ctx, tf); err != nil {
		t.Fatalf("Versions of allowed %s: %v", tf, err)
	}
}

// warm fetches index.json, VERSION.json and the archive of one provider.
func warm(t *testing.T, tm *testMirror, typ, version, platform string) {
	t.Helper()
	for _, p := range []string{
		tfRegistry + "/hashicorp/" + typ + "/index.json",
		tfRegistry + "/hashicorp/" + typ + "/" + version + ".json",
		archiveURL(typ, version, platform),
	} {
		if resp, body, err := tm.get(p); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %v %v %.200s", p, resp, err, body)
		}
	}
	tm.idle()
}

func TestOfflineServesOnlyTheCache(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{})
	origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64", "darwin_arm64"})
	origin.AddProvider("hashicorp", "null", []string{"3.2.0"}, []string{"linux_amd64"})
	dir := t.TempDir()
	tm := startMirror(t, origin, dir, nil)
	warm(t, tm, "random", "3.6.0", "linux_amd64")
	tm.stop()

	origin.ResetHits()
	tm = startMirror(t, origin, dir, nil, "--offline", "--versions-ttl", "1ns")
	for _, p := range []string{
		tfRegistry + "/hashicorp/random/index.json",
		tfRegistry + "/hashicorp/random/3.6.0.json",
		archiveURL("random", "3.6.0", "linux_amd64"),
	} {
		resp, body, err := tm.get(p)
		if err != nil || resp.StatusCode != 200 || resp.Header.Get("X-Tfmirror-Stale") != "" {
			t.Fatalf("offline, cached %s: %v %v %.200s", p, resp, err, body)
		}
	}
	for _, p := range []string{
		tfRegistry + "/hashicorp/null/index.json",
		tfRegistry + "/hashicorp/null/3.2.0.json",
		archiveURL("random", "3.6.0", "darwin_arm64"),
	} {
		resp, body, err := tm.get(p)
		if err != nil {
			t.Fatal(err)
		}
		wantJSONError(t, "offline, uncached "+p, resp, body, http.StatusServiceUnavailable, "offline")
	}
	if n := origin.TotalHits(); n != 0 {
		t.Fatalf("offline mirror sent %d requests to the origin", n)
	}
}

func TestOriginTokens(t *testing.T) {
	const token = "s3cret-origin-token"
	origin := newOrigin(t, fakeorigin.Options{RequireToken: token, SeparateDownloadHost: true})
	origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	credFile := filepath.Join(t.TempDir(), "terraform.rc")
	err := os.WriteFile(credFile, []byte(fmt.Sprintf("credentials %q {\n  token = %q\n}\n", tfRegistry, token)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	route := routeRegistryTo(origin)
	tests := []struct {
		name    string
		args    []string
		environ []string
	}{
		{"credentials file", []string{"--credentials-file", credFile}, []string{}},
		{"TF_TOKEN_ variable", nil, []string{"TF_TOKEN_registry_terraform_io=" + token}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			origin.ResetHits()
			var logs bytes.Buffer
			tm := startMirrorWith(t, origin, t.TempDir(), &syncWriter{w: &logs}, &overrides{
				dialContext: route, origin: fastRetries, environ: tc.environ,
			}, append([]string{"--allow-private-origins", "--log-level", "debug"}, tc.args...)...)
			warm(t, tm, "random", "3.6.0", "linux_amd64")
			tm.stop()
			for _, k := range []fakeorigin.Kind{fakeorigin.Versions, fakeorigin.Download} {
				if got := origin.LastAuthHeaders(k); len(got) == 0 || got[len(got)-1] != "Bearer "+token {
					t.Errorf("%s requests carried Authorization %q", k, got)
				}
			}
			for _, k := range []fakeorigin.Kind{fakeorigin.Shasums, fakeorigin.Signature, fakeorigin.Archive} {
				for _, h := range origin.LastAuthHeaders(k) {
					if h != "" {
						t.Errorf("%s request to the download host carried Authorization %q", k, h)
					}
				}
			}
			if strings.Contains(logs.String(), token) {
				t.Errorf("the token appears in the log")
			}
		})
	}

	t.Run("no credentials", func(t *testing.T) {
		tm := startMirrorWith(t, origin, t.TempDir(), nil, &overrides{dialContext: route, origin: fastRetries, environ: []string{}},
			"--allow-private-origins")
		resp, body, err := tm.get(tfRegistry + "/hashicorp/random/index.json")
		if err != nil {
			t.Fatal(err)
		}
		wantJSONError(t, "origin refusing the mirror", resp, body, http.StatusBadGateway, "401")
	})
}

// syncWriter serialises writes of concurrent loggers.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func TestSSRFGuards(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{})
	origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	_, port, _ := net.SplitHostPort(origin.Addr)
	local := "localhost:" + port

	t.Run("host not allowed", func(t *testing.T) {
		tm := startMirror(t, origin, t.TempDir(), nil)
		for _, host := range []string{local, "127.0.0.1:" + port, "169.254.169.254", "evil.example.com"} {
			resp, body, err := tm.get(host + "/hashicorp/random/index.json")
			if err != nil {
				t.Fatal(err)
			}
			wantJSONError(t, "host "+host, resp, body, http.StatusNotFound)
		}
		if n := origin.TotalHits(); n != 0 {
			t.Fatalf("origin saw %d requests for hosts that are not allowed", n)
		}
	})

	t.Run("allowed host resolving to loopback", func(t *testing.T) {
		origin.ResetHits()
		tm := startMirrorWith(t, origin, t.TempDir(), nil, &overrides{origin: fastRetries},
			"--allowed-origins", local)
		resp, body, err := tm.get(local + "/hashicorp/random/index.json")
		if err != nil {
			t.Fatal(err)
		}
		wantJSONError(t, "loopback origin", resp, body, http.StatusBadGateway, "non-public address")
		if n := origin.TotalHits(); n != 0 {
			t.Fatalf("origin on loopback saw %d requests", n)
		}
		// The same with --allow-private-origins works.
		tm = startMirrorWith(t, origin, t.TempDir(), nil, &overrides{origin: fastRetries},
			"--allowed-origins", local, "--allow-private-origins")
		if resp, body, err := tm.get(local + "/hashicorp/random/index.json"); err != nil || resp.StatusCode != 200 {
			t.Fatalf("loopback origin with --allow-private-origins: %v %v %s", resp, err, body)
		}
	})
}

// connectProxy is an HTTP CONNECT proxy on loopback that counts tunnels
// and routes tfRegistry to the fake origin.
type connectProxy struct {
	origin  *fakeorigin.Origin
	tunnels atomic.Int32
	mu      sync.Mutex
	targets []string
	conns   map[net.Conn]bool // open client and upstream connections
	// redirect sends tunnels to a host:port key to its value instead.
	redirect map[string]string
	ln       net.Listener
	wg       sync.WaitGroup
}

func startConnectProxy(t *testing.T, origin *fakeorigin.Origin) *connectProxy {
	t.Helper()
	return startRedirectProxy(t, origin, nil)
}

// startRedirectProxy is startConnectProxy, with tunnels to the keys of
// redirect sent to their values instead.
func startRedirectProxy(t *testing.T, origin *fakeorigin.Origin, redirect map[string]string) *connectProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &connectProxy{origin: origin, ln: ln, conns: map[net.Conn]bool{}, redirect: redirect}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.track(c, true)
			p.wg.Add(1)
			go func() { defer p.wg.Done(); defer p.track(c, false); p.serve(c) }()
		}
	}()
	// The mirror keeps idle origin connections open: cut the tunnels.
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *connectProxy) track(c net.Conn, open bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if open {
		p.conns[c] = true
	} else {
		delete(p.conns, c)
	}
}

func (p *connectProxy) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil || req.Method != http.MethodConnect {
		io.WriteString(c, "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
		return
	}
	p.mu.Lock()
	p.targets = append(p.targets, req.Host)
	p.mu.Unlock()
	target := req.Host
	if host, _, _ := net.SplitHostPort(target); host == tfRegistry {
		target = p.origin.Addr
	}
	if to, ok := p.redirect[target]; ok {
		target = to
	}
	up, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	defer up.Close()
	p.track(up, true)
	defer p.track(up, false)
	p.tunnels.Add(1)
	io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, br); up.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
	<-done
}

func (p *connectProxy) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.targets...)
}

func TestUpstreamConnectProxy(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{})
	origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})

	t.Run("everything through the proxy", func(t *testing.T) {
		proxy := startConnectProxy(t, origin)
		// No dialContext override: the mirror dials only the proxy.
		tm := startMirrorWith(t, origin, t.TempDir(), nil, &overrides{origin: fastRetries},
			"--allow-private-origins", "--upstream-proxy", "http://"+proxy.ln.Addr().String())
		warm(t, tm, "random", "3.6.0", "linux_amd64")
		if proxy.tunnels.Load() == 0 {
			t.Fatal("no tunnel went through the proxy")
		}
		for _, target := range proxy.seen() {
			if target != tfRegistry+":443" && target != origin.DownloadAddr {
				t.Errorf("proxy tunnelled to unexpected %s", target)
			}
		}
		if n := origin.TotalHits(); n == 0 {
			t.Fatal("origin saw nothing")
		}
	})

	t.Run("proxy on loopback is allowed, private targets are not", func(t *testing.T) {
		// Without --allow-private-origins: the proxy itself is on loopback
		// and is used, the registry name is left to the proxy to resolve,
		// but the download URLs the registry names point at 127.0.0.1 and
		// are refused before anything is sent.
		proxy := startConnectProxy(t, origin)
		origin.ResetHits()
		tm := startMirrorWith(t, origin, t.TempDir(), nil, &overrides{origin: fastRetries},
			"--upstream-proxy", "http://"+proxy.ln.Addr().String())
		if resp, body, err := tm.get(tfRegistry + "/hashicorp/random/index.json"); err != nil || resp.StatusCode != 200 {
			t.Fatalf("index.json through the proxy: %v %v %s", resp, err, body)
		}
		resp, body, err := tm.get(tfRegistry + "/hashicorp/random/3.6.0.json")
		if err != nil {
			t.Fatal(err)
		}
		wantJSONError(t, "download URL on a private address", resp, body, http.StatusBadGateway, "non-public address")
		for _, target := range proxy.seen() {
			if target != tfRegistry+":443" {
				t.Errorf("proxy was asked for %s; private targets must be refused before the proxy", target)
			}
		}
		if origin.Hits(fakeorigin.Shasums) != 0 || origin.Hits(fakeorigin.Archive) != 0 {
			t.Error("the private download host was contacted")
		}
	})
}

func TestTerraformInitWithOriginDownAfterWarming(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{SeparateDownloadHost: true}, "--versions-ttl", "1ns")
	host := runtime.GOOS + "_" + runtime.GOARCH
	e.origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{host})
	providers := map[string]string{"random": "hashicorp/random@3.6.0"}
	if out, err := e.terraform(writeConfig(t, providers), "init", "-no-color"); err != nil {
		t.Fatalf("warming terraform init failed: %v\n%s", err, out)
	}
	waitIdle(e.mirror.engine)

	e.origin.SetDown(http.StatusBadGateway)
	e.origin.ResetHits()
	if out, err := e.terraform(writeConfig(t, providers), "init", "-no-color"); err != nil {
		t.Fatalf("terraform init with the origin down failed: %v\n%s", err, out)
	}
	if e.origin.Hits(fakeorigin.Versions) == 0 {
		t.Fatal("the mirror did not try to refresh the version list")
	}
	if got := metric(t, e.mirror.registry, "tfmirror_stale_responses_total", "kind", "versions"); got < 1 {
		t.Fatalf("tfmirror_stale_responses_total{kind=versions} = %v, want >= 1", got)
	}
}

func TestEnvironmentProxy(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{})
	origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	route := routeRegistryTo(origin)
	tests := []struct {
		name        string
		environ     func(proxy string) []string
		wantTunnels bool
	}{
		{"HTTPS_PROXY", func(p string) []string { return []string{"HTTPS_PROXY=http://" + p} }, true},
		{"https_proxy", func(p string) []string { return []string{"https_proxy=http://" + p} }, true},
		{"NO_PROXY exempts the origin", func(p string) []string {
			return []string{"HTTPS_PROXY=http://" + p, "NO_PROXY=example.com,registry.terraform.io"}
		}, false},
		{"no proxy variables", func(string) []string { return []string{} }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			proxy := startConnectProxy(t, origin)
			tm := startMirrorWith(t, origin, t.TempDir(), nil, &overrides{
				dialContext: route, origin: fastRetries, environ: tc.environ(proxy.ln.Addr().String()),
			}, "--allow-private-origins")
			if resp, body, err := tm.get(tfRegistry + "/hashicorp/random/index.json"); err != nil || resp.StatusCode != 200 {
				t.Fatalf("index.json: %v %v %s", resp, err, body)
			}
			if got := proxy.tunnels.Load() > 0; got != tc.wantTunnels {
				t.Fatalf("tunnels through the proxy: %d (targets %v), want some: %v", proxy.tunnels.Load(), proxy.seen(), tc.wantTunnels)
			}
		})
	}
}
