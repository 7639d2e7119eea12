package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestClientAuthProcess runs the binary with --auth-tokens-file: SIGHUP
// reloads the tokens (a broken file keeps the old ones), a restart keeps
// signed archive URLs valid, and no token or signature reaches the log.
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
	sig := signed[strings.Index(signed, "sig=")+len("sig="):]
	for _, p := range []*proc{m, m2} {
		p.mu.Lock()
		raw, _ := json.Marshal(p.lines)
		p.mu.Unlock()
		for _, secret := range []string{tokenA, tokenB, sig} {
			if strings.Contains(string(raw), secret) {
				t.Errorf("the log contains %q", secret)
			}
		}
	}
}
