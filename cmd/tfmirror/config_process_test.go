package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestConfigReloadProcess runs the binary with --config: SIGHUP with a
// good file puts its reloadable settings in force for the next request
// (the log level, the status page's URL) and keeps the others with a
// warning; with a broken file it keeps the configuration in force, and
// logs and counts the refusal. The status page shows each setting's value
// and source, and no secret reaches it or the log.
func TestConfigReloadProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	origin := newOrigin(t, fakeorigin.Options{})
	caFile := originCAFile(t, origin)
	dataDir := filepath.Join(t.TempDir(), "data")
	path := filepath.Join(t.TempDir(), "tfmirror.hcl")
	const secret = "hunter2-secret-7f3a"
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`log_level = "info"
versions_ttl = "10m"
upstream_proxy = "http://user:` + secret + `@127.0.0.1:9/"
`)
	m := startProcess(t, bin, dataDir, origin, caFile, "--config", path)
	ctx := context.Background()

	type setting struct{ Name, Value, Source string }
	status := func() (string, map[string]setting) {
		t.Helper()
		body, _, err := m.get(ctx, "/?format=json")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(body), secret) {
			t.Errorf("the status page shows the secret: %s", body)
		}
		var st struct {
			MirrorURL     string `json:"mirror_url"`
			Configuration struct {
				File     string    `json:"file"`
				Settings []setting `json:"settings"`
			} `json:"configuration"`
		}
		if err := json.Unmarshal(body, &st); err != nil {
			t.Fatal(err)
		}
		if st.Configuration.File != path {
			t.Errorf("configuration file %q, want %s", st.Configuration.File, path)
		}
		out := map[string]setting{}
		for _, s := range st.Configuration.Settings {
			out[s.Name] = s
		}
		return st.MirrorURL, out
	}
	want := func(got map[string]setting, name, value, source string) {
		t.Helper()
		if s := got[name]; s.Value != value || s.Source != source {
			t.Errorf("status page: %s = %q from %q, want %q from %s", name, s.Value, s.Source, value, source)
		}
	}
	// requestLines are the access-log lines of route logged after the
	// first n lines.
	requestLines := func(n int, route string) int {
		m.mu.Lock()
		defer m.mu.Unlock()
		count := 0
		for _, l := range m.lines[n:] {
			if r, _ := l["route"].(string); l["msg"] == "request" && r == route {
				count++
			}
		}
		return count
	}
	logLines := func() int { m.mu.Lock(); defer m.mu.Unlock(); return len(m.lines) }

	_, got := status()
	want(got, "log-level", "info", "file")
	want(got, "listen", "127.0.0.1:0", "flag")
	want(got, "upstream-proxy", "http://(credentials)@127.0.0.1:9/", "file")
	want(got, "cache-max-bytes", "0", "default")
	if len(got) < 50 {
		t.Errorf("the status page shows %d settings", len(got))
	}
	// At info, a health check is not logged: the status view after it is,
	// and the log keeps the order.
	n := logLines()
	if _, _, err := m.get(ctx, "/healthz"); err != nil {
		t.Fatal(err)
	}
	status()
	m.waitLines(func() bool { return requestLines(n, "status") > 0 })
	if requestLines(n, "health") != 0 {
		t.Fatal("a health check logged at level info")
	}

	// A good file: the level and the URL change; versions_ttl needs a restart.
	write(`log_level = "debug"
public_url = "https://mirror.example.test/"
versions_ttl = "20m"
upstream_proxy = "http://user:` + secret + `@127.0.0.1:9/"
`)
	m.cmd.Process.Signal(syscall.SIGHUP)
	m.waitLog("configuration file reloaded", 10*time.Second)
	restart := m.waitLog("settings changed in the configuration file take effect only after a restart; their values in force stay", 10*time.Second)
	if names, _ := json.Marshal(restart["settings"]); string(names) != `["versions_ttl"]` {
		t.Errorf("settings named as needing a restart: %s", names)
	}
	n = logLines()
	if _, _, err := m.get(ctx, "/healthz"); err != nil {
		t.Fatal(err)
	}
	m.waitLines(func() bool { return requestLines(n, "health") > 0 })
	mirrorURL, got := status()
	if mirrorURL != "https://mirror.example.test/" {
		t.Errorf("mirror_url after the reload: %q", mirrorURL)
	}
	want(got, "log-level", "debug", "file")
	want(got, "public-url", "https://mirror.example.test/", "file")
	want(got, "versions-ttl", "10m0s", "file")

	// A broken file: refused whole, the level and URL stay.
	write(`log_level = "warn"
public_url = "https://other.example.test/"
cache_max_bytes = "lots"
`)
	m.cmd.Process.Signal(syscall.SIGHUP)
	refused := m.waitLog("configuration file refused; the configuration in force stays", 10*time.Second)
	if e, _ := refused["error"].(string); !strings.Contains(e, path+":3,") {
		t.Errorf("the refusal does not name the line: %q", e)
	}
	mirrorURL, got = status()
	if mirrorURL != "https://mirror.example.test/" {
		t.Errorf("mirror_url after a refused reload: %q", mirrorURL)
	}
	want(got, "log-level", "debug", "file")
	metrics, _, err := m.get(ctx, "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{`tfmirror_config_reloads_total{outcome="applied"} 1`, `tfmirror_config_reloads_total{outcome="refused"} 1`} {
		if !strings.Contains(string(metrics), line) {
			t.Errorf("/metrics lacks %s", line)
		}
	}

	m.cmd.Process.Signal(syscall.SIGTERM)
	if err := m.wait(30 * time.Second); err != nil {
		t.Fatalf("tfmirror exited with %v", err)
	}
	m.mu.Lock()
	raw, _ := json.Marshal(m.lines)
	m.mu.Unlock()
	if strings.Contains(string(raw), secret) {
		t.Error("the log contains the secret")
	}
}

// waitLines waits until cond holds of p's log, checking it again as each
// line arrives; it fails the test when p exits or at the deadline first.
func (p *proc) waitLines(cond func() bool) {
	p.t.Helper()
	deadline := time.NewTimer(time.Minute) // as waitLog's
	defer deadline.Stop()
	for {
		p.mu.Lock()
		changed := p.changed
		p.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-p.exited:
			if !cond() {
				p.t.Fatalf("tfmirror exited (%v) before the log showed what was waited for", p.err)
			}
			return
		case <-deadline.C:
			p.t.Fatal("the log did not show what was waited for within a minute")
		}
	}
}
