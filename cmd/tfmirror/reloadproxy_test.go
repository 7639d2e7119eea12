package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/discovery"
)

// TestReloadRefusesDroppingUpstreamProxyOverARefusedEnvironment: serve
// reads the proxy variables of its environment only without
// upstream_proxy, and refuses to start on an HTTPS_PROXY it cannot use
// (here a password holding a "/" that is not percent-encoded). A reload
// of a file that drops upstream_proxy keeps the change for a restart,
// which would read that HTTPS_PROXY and refuse to start: the reload is
// refused, saying why without the variable's value, and the
// configuration in force stays, as config check refuses the file in
// that environment. Where the variable is one serve takes, the reload
// is taken, the change kept for the restart.
func TestReloadRefusesDroppingUpstreamProxyOverARefusedEnvironment(t *testing.T) {
	// start serves with upstream_proxy in an environment of environ, its
	// reload reading that environment as serve's does.
	start := func(t *testing.T, environ []string) (m *server, conf string, level *slog.LevelVar) {
		t.Helper()
		dir := t.TempDir()
		conf = filepath.Join(dir, "tfmirror.hcl")
		writePrivate(t, conf, "log_level = \"info\"\nupstream_proxy = \"http://egress.corp.example:3128\"\n")
		args := []string{"--config", conf, "--data-dir", filepath.Join(dir, "data"), "--insecure-http"}
		lookupEnv := overrides{environ: environ}.lookupEnv
		e, err := parseServeConfig(args, lookupEnv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		m, err = newServer(e.Config, slog.New(slog.DiscardHandler), overrides{environ: environ})
		if err != nil {
			t.Fatalf("start with upstream_proxy in %q (the variables not read): %v", environ, err)
		}
		t.Cleanup(func() { m.shutdown(context.Background()) })
		level = new(slog.LevelVar)
		if err := m.useConfig(e, reloadServeConfig(args, lookupEnv, e.Config), level); err != nil {
			t.Fatal(err)
		}
		return m, conf, level
	}
	const dropped = "log_level = \"debug\"\n" // and no upstream_proxy

	refused := []string{"HTTPS_PROXY=http://mirror:/s3cret@proxy.corp.example:3128"}
	var dc discovery.Config
	if err := originNetwork(&dc, settings.Config{}, overrides{environ: refused}, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatalf("serve without upstream_proxy starts in %q, want it refused", refused)
	}
	m, conf, level := start(t, refused)
	writePrivate(t, conf, dropped)
	_, err := m.reload()
	if err == nil || !strings.Contains(err.Error(), "HTTPS_PROXY") || !strings.Contains(err.Error(), "--upstream-proxy") {
		t.Fatalf("reload dropping upstream_proxy where a restart would refuse HTTPS_PROXY: %v, want it refused naming HTTPS_PROXY and --upstream-proxy", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("reload's error %q shows the proxy's password", err)
	}
	if last := m.configuration().LastReload; last == nil || last.Applied {
		t.Errorf("last reload %+v, want it not applied", last)
	}
	if level.Level() != slog.LevelInfo {
		t.Errorf("log level %v after the refused reload, want the one in force (info)", level.Level())
	}
	if m.conf.Load().Current().Config.UpstreamProxy == "" {
		t.Errorf("upstream_proxy gone from the configuration in force after the refused reload, want it kept")
	}

	m, conf, level = start(t, []string{"HTTPS_PROXY=http://mirror:%2Fs3cret@proxy.corp.example:3128"})
	writePrivate(t, conf, dropped)
	got, err := m.reload()
	if err != nil {
		t.Fatalf("reload dropping upstream_proxy where HTTPS_PROXY is one serve takes: %v", err)
	}
	restart := false
	for _, s := range got.Settings {
		restart = restart || (s.Name == "upstream-proxy" && s.Restart)
	}
	if !restart {
		t.Errorf("reload %+v: want upstream-proxy kept for a restart", got.Settings)
	}
	if level.Level() != slog.LevelDebug {
		t.Errorf("log level %v after the reload, want debug", level.Level())
	}
}
