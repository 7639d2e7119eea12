package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/proxy"
)

// TestTrustedProxiesProcess runs the binary behind a "proxy" on
// 127.0.0.2 named in --trusted-proxies: the clients it names in
// X-Forwarded-For are limited apart (one's wrong tokens do not get the
// other refused), and the access log names each.
func TestTrustedProxiesProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	origin := newOrigin(t, fakeorigin.Options{})
	origin.AddProvider("hashicorp", "random", []string{"1.0.0"}, []string{"linux_amd64"})
	caFile := originCAFile(t, origin)
	tokens := filepath.Join(t.TempDir(), "tokens")
	const token = "token-0f1e2d3c4b5a6978"
	if err := os.WriteFile(tokens, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	m := startProcess(t, bin, filepath.Join(t.TempDir(), "data"), origin, caFile,
		"--auth-tokens-file", tokens, "--trusted-proxies", "127.0.0.2/32,10.0.0.0/8")
	if l := m.logged(trustedProxiesMessage); l == nil {
		t.Errorf("no %q line at start", trustedProxiesMessage)
	}
	if m.logged(noTrustedProxiesWarning) != nil {
		t.Error("warned about no trusted proxies while there are")
	}
	tr := m.client.Transport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 10 * time.Second}).DialContext
	t.Cleanup(tr.CloseIdleConnections)
	viaProxy := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	index := m.url + origin.Addr + "/hashicorp/random/index.json"
	get := func(tok, xff string) int {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, index, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("X-Forwarded-For", xff)
		resp, err := viaProxy.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	const broken, good = "192.0.2.10", "198.51.100.7"
	const wrong, brokenVia = "wrong-token-guess-0123", "203.0.113.1, " + broken + ", 10.1.2.3"
	failed := 0 // the wrong tokens answered 401: the failures counted
	for i := range proxy.AuthFailureBurst {
		if got := get(wrong, brokenVia); got != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: status %d, want 401", i+1, got)
		}
		failed++
	}
	// Over the limit, even the right token is refused. The limit gives
	// one more try a second (proxy.AuthFailureRate), which a loaded
	// machine may have earned while the burst was sent (then the right
	// token was let through): each round spends what was earned with the
	// wrong token first (a 401 until a 429), then asks with the right one.
	over := false
	for round := 0; round < 5 && !over; round++ {
		for i := 0; i < proxy.AuthFailureBurst; i++ {
			got := get(wrong, brokenVia)
			if got == http.StatusTooManyRequests {
				break
			} else if got != http.StatusUnauthorized {
				t.Fatalf("wrong token over the limit: status %d, want 401 or 429", got)
			}
			failed++
		}
		switch got := get(token, broken); got {
		case http.StatusTooManyRequests:
			over = true
		case http.StatusOK:
			t.Logf("round %d: a try was earned back before the right token's request", round+1)
		default:
			t.Fatalf("%s over the limit: status %d, want 429", broken, got)
		}
	}
	if !over {
		t.Errorf("%s over the limit: the right token was let through in every round, want 429", broken)
	}
	if got := get(token, good); got != http.StatusOK {
		t.Errorf("%s through the same proxy: status %d, want 200", good, got)
	}
	// The status page shows a client with a token the failures and the
	// trusted ranges, never the address. (Whether the address is still
	// over the limit depends on the wall clock here; proxy's tests hold
	// the clock.)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url+"?format=json", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Forwarded-For", good)
	resp, err := viaProxy.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	var st proxy.Status
	if err == nil {
		err = json.Unmarshal(body, &st)
	}
	if err != nil {
		t.Fatalf("status page: %v", err)
	}
	if c := st.ClientAuth; c == nil || c.FailedAttempts[proxy.FailureToken] != uint64(failed) || c.TrustedProxyRanges != 2 || bytes.Contains(body, []byte(broken)) {
		t.Errorf("status page's client_auth %+v, want %d token failures, 2 trusted ranges, no address:\n%s", c, failed, body)
	}
	if l := m.waitLog(proxy.LimitedMessage, 10*time.Second); l["client"] != broken || l["level"] != "WARN" {
		t.Errorf("over the limit logged as %v", l)
	}
	// The access-log lines, written a moment after their answers.
	seen := map[string]bool{}
	for deadline := time.Now().Add(time.Minute); !seen[good] && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		m.mu.Lock()
		for _, l := range m.lines {
			if l["msg"] == "request" {
				c, _ := l["client"].(string)
				seen[c] = true
			}
		}
		m.mu.Unlock()
	}
	if !seen[broken] || !seen[good] || len(seen) != 2 {
		t.Errorf("access log clients %v, want %s and %s only", seen, broken, good)
	}
}

// Plain HTTP (TLS ends at a proxy in front) with client authentication
// and no trusted proxies is warned about at start: all clients share the
// proxy's budget of failed attempts. With trusted proxies, or TLS, or
// without client authentication, nothing is said but which proxies are
// trusted.
func TestNoTrustedProxiesWarning(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		cfg     settings.Config
		trusted []netip.Prefix
		want    string
	}{
		{"plain HTTP, auth, none trusted", settings.Config{InsecureHTTP: true, AuthTokensFile: "/t"}, nil, noTrustedProxiesWarning},
		{"plain HTTP, auth, trusted", settings.Config{InsecureHTTP: true, AuthTokensFile: "/t"}, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, trustedProxiesMessage},
		{"TLS, auth, none trusted", settings.Config{AuthTokensFile: "/t"}, nil, ""},
		{"plain HTTP, no auth", settings.Config{InsecureHTTP: true}, nil, ""},
	} {
		var buf bytes.Buffer
		logTrustedProxies(slog.New(slog.NewJSONHandler(&buf, nil)), tc.cfg, tc.trusted)
		switch {
		case tc.want == "" && buf.Len() != 0:
			t.Errorf("%s: logged %s", tc.name, buf.String())
		case tc.want != "" && !strings.Contains(buf.String(), `"msg":"`+tc.want+`"`):
			t.Errorf("%s: logged %q, want %q", tc.name, buf.String(), tc.want)
		}
	}
}

// TestTrustedProxiesDocExample: the examples of docs/operations.md's
// "Behind a reverse proxy or load balancer" are settings serve accepts,
// trusting the ranges they say.
func TestTrustedProxiesDocExample(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n### Behind a reverse proxy or load balancer\n")
	if !ok {
		t.Fatal("docs/operations.md has no section \"Behind a reverse proxy or load balancer\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	noEnv := func(string) (string, bool) { return "", false }
	checked := 0
	for _, f := range fences(section) {
		if f.lang != "hcl" {
			continue
		}
		path := filepath.Join(t.TempDir(), "tfmirror.hcl")
		if err := os.WriteFile(path, []byte(strings.Join(f.lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		e, err := parseServeConfig([]string{"--config", path, "--data-dir", t.TempDir()}, noEnv, io.Discard)
		if err != nil {
			t.Fatalf("the hcl example: %v", err)
		}
		if got := strings.Join(e.Config.TrustedProxies, ","); got != "10.244.0.0/16" || !e.Config.InsecureHTTP {
			t.Errorf("the hcl example trusts %q (insecure_http %v)", got, e.Config.InsecureHTTP)
		}
		if strings.Contains(strings.Join(f.lines, "\n"), "public_url") && e.Config.PublicURL != "https://tfmirror.example.com/" {
			t.Errorf("the hcl example's public URL is %q", e.Config.PublicURL)
		}
		checked++
	}
	for _, line := range strings.Split(section, "\n") {
		args, ok := strings.CutPrefix(strings.TrimSpace(line), "tfmirror serve ")
		if !ok {
			continue
		}
		e, err := parseServeConfig(append(strings.Fields(args), "--data-dir", t.TempDir()), noEnv, io.Discard)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if len(e.Config.TrustedProxies) == 0 {
			t.Errorf("%s: no trusted proxies", line)
		}
		if _, err := settings.ParseTrustedProxies(e.Config.TrustedProxies); err != nil {
			t.Errorf("%s: %v", line, err)
		}
		checked++
	}
	if checked != 3 {
		t.Errorf("%d examples checked, want the two hcl files and the command", checked)
	}
}
