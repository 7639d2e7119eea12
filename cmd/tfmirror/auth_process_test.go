package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/proxy"
)

// TestClientAuthProcess runs the binary with --auth-tokens-file: a file
// with a token too short to be safe is refused at start (exit status 1)
// and on reload (the tokens in force stay), naming its file and line;
// SIGHUP reloads the tokens (a broken file keeps the old ones), a restart
// keeps signed archive URLs valid, wrong tokens from one address are
// answered 429 once over the limit, and no token or signature reaches the
// log.
func TestClientAuthProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const ns, typ, version = "hashicorp", "random", "1.0.0"
	bin := buildBinary(t)
	origin := newOrigin(t, fakeorigin.Options{})
	origin.AddProvider(ns, typ, []string{version}, []string{"linux_amd64"})
	caFile := originCAFile(t, origin)
	dataDir := filepath.Join(t.TempDir(), "data")
	tokens := filepath.Join(t.TempDir(), "tokens")
	const tokenA, tokenB = "token-a-0f1e2d3c4b5a", "token-b-9a8b7c6d5e4f"
	writeTokens := func(content string) {
		t.Helper()
		if err := os.WriteFile(tokens, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const short = "abc123"
	writeTokens(tokenA + "\n" + short + "\n")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	refused := exec.CommandContext(ctx, bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir,
		"--allowed-origins", origin.Addr, "--auth-tokens-file", tokens)
	out, err := refused.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Fatalf("serve with a short token: %v, want a non-zero exit\n%s", err, out)
	}
	if want := tokens + ":2: a token of 6 characters is too short"; !strings.Contains(string(out), want) || strings.Contains(string(out), short) {
		t.Fatalf("serve with a short token said %q, want %q and not the token", out, want)
	}
	writeTokens(tokenA + "\n")

	m := startProcess(t, bin, dataDir, origin, caFile, "--auth-tokens-file", tokens)
	base := fmt.Sprintf("%s%s/%s/%s/", m.url, origin.Addr, ns, typ)
	status := func(p *proc, url, token string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := p.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	check := func(p *proc, token string, want int) {
		t.Helper()
		if got := status(p, base+"index.json", token); got != want {
			t.Errorf("index.json with token %q: status %d, want %d", token, got, want)
		}
	}
	check(m, tokenA, 200)
	check(m, tokenB, 401)

	writeTokens("# rotated\n" + tokenB + "\n")
	m.cmd.Process.Signal(syscall.SIGHUP)
	m.waitLog("client tokens reloaded", 10*time.Second)
	check(m, tokenA, 401)
	check(m, tokenB, 200)

	writeTokens("# oops, emptied\n")
	m.cmd.Process.Signal(syscall.SIGHUP)
	m.waitLog("reloading client tokens failed; the previous tokens stay in force", 10*time.Second)
	check(m, tokenB, 200)

	// A short token refuses the whole file; the tokens in force stay.
	m.mu.Lock()
	seen := len(m.lines)
	m.mu.Unlock()
	writeTokens(tokenA + "\n" + short + "\n")
	m.cmd.Process.Signal(syscall.SIGHUP)
	for deadline := time.Now().Add(time.Minute); ; { // as waitLog's
		m.mu.Lock()
		var msg string
		for _, l := range m.lines[seen:] {
			if l["msg"] == "reloading client tokens failed; the previous tokens stay in force" {
				msg, _ = l["error"].(string)
			}
		}
		m.mu.Unlock()
		if msg != "" {
			if !strings.Contains(msg, tokens+":2: a token of 6 characters is too short") {
				t.Errorf("reload refusal %q names no file and line", msg)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no reload refusal logged for a short token")
		}
		time.Sleep(50 * time.Millisecond)
	}
	check(m, tokenA, 401)
	check(m, tokenB, 200)

	// A signed archive URL survives a restart (the key is kept in the data dir).
	urls, header := archiveURLs(t, m.client, base+version+".json", tokenB)
	if cc := header.Get("Cache-Control"); cc != "private, no-store" {
		t.Fatalf("VERSION.json: Cache-Control %q", cc)
	}
	signed := urls["linux_amd64"]
	if fi, err := os.Stat(filepath.Join(dataDir, signingKeyName)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("signing key in the data dir: %v, %v", fi, err)
	}
	m.cmd.Process.Signal(syscall.SIGTERM)
	if err := m.wait(30 * time.Second); err != nil {
		t.Fatalf("tfmirror exited with %v", err)
	}
	writeTokens(tokenB + "\n")
	m2 := startProcess(t, bin, dataDir, origin, caFile, "--auth-tokens-file", tokens)
	base2 := fmt.Sprintf("%s%s/%s/%s/", m2.url, origin.Addr, ns, typ)
	if got := status(m2, base2+signed, ""); got != 200 {
		t.Errorf("archive URL signed before the restart: status %d, want 200", got)
	}

	// Wrong tokens from one address: 401 while within the limit, then
	// 429 with Retry-After for every credential, the right one too.
	const wrong = "wrong-token-guess-0123"
	for i := range proxy.AuthFailureBurst {
		if got := status(m2, base2+"index.json", wrong); got != 401 {
			t.Fatalf("wrong token %d: status %d, want 401", i+1, got)
		}
	}
	// The limiter gives back a try a second (proxy.AuthFailureRate): on
	// a loaded machine the tries above may have taken longer than that,
	// so wrong tokens go on until one is refused (a bounded number),
	// and the right token is judged when it follows that refusal within
	// the second; a slower round is made again, a few times at most.
	refill := time.Duration(float64(time.Second) / float64(proxy.AuthFailureRate))
	for round := 1; ; round++ {
		var limited time.Time
		for i := 0; i < 60 && limited.IsZero(); i++ {
			switch got := status(m2, base2+"index.json", wrong); got {
			case http.StatusTooManyRequests:
				limited = time.Now()
			case http.StatusUnauthorized:
			default:
				t.Fatalf("wrong token past the burst: status %d, want 401 or 429", got)
			}
		}
		if limited.IsZero() {
			t.Fatal("60 wrong tokens past the burst, none refused with 429")
		}
		req, _ := http.NewRequest(http.MethodGet, base2+"index.json", nil)
		req.Header.Set("Authorization", "Bearer "+tokenB)
		resp, err := m2.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "" {
			break
		}
		if time.Since(limited) < refill || round == 5 {
			t.Fatalf("the right token after %d failures: status %d, Retry-After %q; want 429 with Retry-After",
				proxy.AuthFailureBurst, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if l := m2.waitLog("client authentication failed", 10*time.Second); l["client"] != "127.0.0.1" || l["level"] != "WARN" {
		t.Errorf("failure logged as %v", l)
	}
	sig := signed[strings.Index(signed, "sig=")+len("sig="):]
	for _, p := range []*proc{m, m2} {
		p.mu.Lock()
		raw, _ := json.Marshal(p.lines)
		p.mu.Unlock()
		for _, secret := range []string{tokenA, tokenB, sig, short, wrong} {
			if strings.Contains(string(raw), secret) {
				t.Errorf("the log contains %q", secret)
			}
		}
	}
}
