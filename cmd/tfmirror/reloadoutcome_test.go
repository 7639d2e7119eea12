package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/proxy"
)

// TestReloadOutcomeShown: what the last reload (tfmirror reload, SIGHUP)
// did is on the status page's configuration block and in the metrics,
// for each file it reads: a client tokens file refused (a revoked token
// stays in force with the tokens before it) says so with its file:line
// and sets tfmirror_auth_tokens_last_reload_successful to 0, as a
// configuration file refused does with its own gauge; a reload that puts
// both in force says that, and sets both gauges to 1 again.
func TestReloadOutcomeShown(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "tfmirror.hcl")
	tokens := filepath.Join(dir, "tokens")
	const token = "0123456789abcdef0123456789abcdef"
	writePrivate(t, conf, "log_level = \"info\"\n")
	writePrivate(t, tokens, token+"\n")
	args := []string{"--config", conf, "--data-dir", filepath.Join(dir, "data"), "--insecure-http", "--auth-tokens-file", tokens}
	m, _ := reloadingServer(t, args)
	metric := func(name string, labels ...string) float64 {
		t.Helper()
		mfs, err := m.registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
		series:
			for _, s := range mf.GetMetric() {
				for i := 0; i+1 < len(labels); i += 2 {
					found := false
					for _, l := range s.GetLabel() {
						found = found || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
					}
					if !found {
						continue series
					}
				}
				if s.Gauge != nil {
					return s.GetGauge().GetValue()
				}
				return s.GetCounter().GetValue()
			}
		}
		t.Fatalf("no series %s %v", name, labels)
		return 0
	}
	if c := m.configuration(); c == nil || c.LastReload != nil {
		t.Fatalf("before any reload: configuration %+v, want no last reload", c)
	}
	if got := metric("tfmirror_auth_tokens_last_reload_successful"); got != 1 {
		t.Errorf("at start: tfmirror_auth_tokens_last_reload_successful %v, want 1", got)
	}

	before := time.Now()
	writePrivate(t, tokens, token+"\nshort\n")
	if _, err := m.reload(); err == nil {
		t.Fatal("a tokens file with a short token was put in force")
	}
	last := m.configuration().LastReload
	if last == nil || last.Applied || !strings.Contains(last.Error, tokens+":2:") || last.At.Before(before) {
		t.Errorf("after a refused tokens file: last reload %+v, want it refused with %s:2", last, tokens)
	}
	if strings.Contains(last.Error, "short\n") || strings.Contains(last.Error, token) {
		t.Errorf("the status page's reload error quotes a token: %q", last.Error)
	}
	if got := metric("tfmirror_auth_tokens_last_reload_successful"); got != 0 {
		t.Errorf("after a refused tokens file: tfmirror_auth_tokens_last_reload_successful %v, want 0", got)
	}
	if got := metric("tfmirror_auth_tokens_reloads_total", "outcome", "refused"); got != 1 {
		t.Errorf("tfmirror_auth_tokens_reloads_total{outcome=refused} %v, want 1", got)
	}
	if got := metric("tfmirror_config_last_reload_successful"); got != 1 {
		t.Errorf("the configuration file was put in force, but tfmirror_config_last_reload_successful is %v", got)
	}

	writePrivate(t, conf, "log_level = \"loud\"\n")
	if _, err := m.reload(); err == nil {
		t.Fatal("a configuration file with a bad log level was put in force")
	}
	last = m.configuration().LastReload
	if last == nil || last.Applied || !strings.Contains(last.Error, conf+":1") || !strings.Contains(last.Error, tokens+":2:") {
		t.Errorf("after both files refused: last reload %+v, want both named with their lines", last)
	}

	writePrivate(t, conf, "log_level = \"debug\"\n")
	writePrivate(t, tokens, token+"\n")
	if _, err := m.reload(); err != nil {
		t.Fatal(err)
	}
	if last = m.configuration().LastReload; last == nil || !last.Applied || last.Error != "" {
		t.Errorf("after both files put in force: last reload %+v", last)
	}
	for _, g := range []string{"tfmirror_auth_tokens_last_reload_successful", "tfmirror_config_last_reload_successful"} {
		if got := metric(g); got != 1 {
			t.Errorf("after both files put in force: %s %v, want 1", g, got)
		}
	}
	if got := metric("tfmirror_auth_tokens_reloads_total", "outcome", "applied"); got != 1 {
		t.Errorf("tfmirror_auth_tokens_reloads_total{outcome=applied} %v, want 1", got)
	}
}

// TestReloadRefusalSaysWhatWasPutInForce: a reload that puts the
// configuration file in force but refuses the client tokens file fails
// (tfmirror reload exits 1 with its error alone), and the error says the
// configuration file was put in force, and what of it changed, besides
// the tokens file refused. It named the refused file alone, and the
// command's help says a refused file leaves the configuration in force:
// an operator read the new log level and policy as not in force.
func TestReloadRefusalSaysWhatWasPutInForce(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "tfmirror.hcl")
	tokens := filepath.Join(dir, "tokens")
	writePrivate(t, conf, "log_level = \"info\"\n")
	writePrivate(t, tokens, "0123456789abcdef0123456789abcdef\n")
	args := []string{"--config", conf, "--data-dir", filepath.Join(dir, "data"), "--insecure-http", "--auth-tokens-file", tokens}
	m, level := reloadingServer(t, args)
	writePrivate(t, conf, "log_level = \"debug\"\npolicy {\n  deny = [\"registry.terraform.io/acme/*\"]\n}\n")
	writePrivate(t, tokens, "short\n")
	_, err := m.reload()
	if err == nil {
		t.Fatal("a tokens file with a short token was put in force")
	}
	if level.Level() != slog.LevelDebug {
		t.Fatalf("log level %v: the configuration file was not put in force", level.Level())
	}
	msg := err.Error()
	for _, want := range []string{tokens + ":1:", "configuration file " + conf + " put in force", "log_level", "policy"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the reload's error lacks %q:\n%s", want, msg)
		}
	}
}

// A reload says what of the file is not in force because a flag or the
// environment wins over it, as the log and tfmirror config check say it:
// an operator who edits such a value and runs tfmirror reload learns
// there that the edit changed nothing.
func TestReloadSaysOverriddenValues(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "tfmirror.hcl")
	writePrivate(t, conf, "log_level = \"info\"\n")
	m, _ := reloadingServer(t, []string{"--config", conf, "--data-dir", filepath.Join(dir, "data"), "--insecure-http", "--log-level", "warn"})
	writePrivate(t, conf, "log_level = \"debug\"\n")
	res, err := m.reload()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	printReloaded(&out, res)
	if !strings.Contains(out.String(), "warning: ") || !strings.Contains(out.String(), "log_level is not in force: --log-level on the command line wins over the file") ||
		!strings.Contains(out.String(), conf+":1") {
		t.Errorf("tfmirror reload printed:\n%s\nwant a warning, with the file's line, that log_level is not in force", out.String())
	}
}

// TestReloadRefusalSaysTheTokensPutInForce: a reload that refuses the
// configuration file but puts the client tokens file in force (a token
// removed from it, revoked) fails, and its error, all tfmirror reload
// prints, says the tokens file was put in force, as the command's help
// says the error tells what the other files put in force: it said the
// configuration file was refused alone, and the operator took the
// revocation for not done.
func TestReloadRefusalSaysTheTokensPutInForce(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "tfmirror.hcl")
	tokens := filepath.Join(dir, "tokens")
	const kept, revoked = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	writePrivate(t, conf, "log_level = \"info\"\n")
	writePrivate(t, tokens, kept+"\n"+revoked+"\n")
	m, _ := reloadingServer(t, []string{"--config", conf, "--data-dir", filepath.Join(dir, "data"), "--insecure-http", "--auth-tokens-file", tokens})
	writePrivate(t, conf, "log_level = \"loud\"\n")
	writePrivate(t, tokens, kept+"\n")
	_, err := m.reload()
	if err == nil {
		t.Fatal("a configuration file with a bad log level was put in force")
	}
	for _, want := range []string{"configuration file " + conf + " refused", "client tokens file " + tokens + " put in force (1 token)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the reload's error lacks %q:\n%s", want, err)
		}
	}
}

// TestReloadKeepsASettingPendingForARestart: a reload of a file that
// changes a setting which cannot change while serving keeps its value in
// force, and the status page's configuration gives the file's value as
// pending a restart; a later reload of a file that gives it back its
// value in force takes it off, and one that changes it again shows the
// newer value.
func TestReloadKeepsASettingPendingForARestart(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "tfmirror.hcl")
	writePrivate(t, conf, "max_connections = 100\n")
	m, _ := reloadingServer(t, []string{"--config", conf, "--data-dir", filepath.Join(dir, "data"), "--insecure-http"})
	setting := func(name string) proxy.Setting {
		t.Helper()
		for _, s := range m.configuration().Settings {
			if s.Name == name {
				return s
			}
		}
		t.Fatalf("no setting %s on the status page", name)
		return proxy.Setting{}
	}
	if s := setting("max-connections"); s.Value != "100" || s.RestartPending {
		t.Fatalf("at start: %+v", s)
	}
	for _, step := range []struct {
		file    string
		pending bool
		want    string
	}{
		{"max_connections = 200\nlog_level = \"debug\"\n", true, "200"},
		{"max_connections = 300\n", true, "300"},
		{"max_connections = 100\n", false, ""},
	} {
		writePrivate(t, conf, step.file)
		if _, err := m.reload(); err != nil {
			t.Fatal(err)
		}
		s := setting("max-connections")
		if s.Value != "100" || s.RestartPending != step.pending || s.Pending != step.want {
			t.Errorf("after a reload of %q: %+v, want the value in force 100, pending %v %q", step.file, s, step.pending, step.want)
		}
		if s := setting("log-level"); s.RestartPending {
			t.Errorf("log_level is reloadable, and it waits for a restart: %+v", s)
		}
	}
}

// writePrivate writes content to path, mode 0600, as the operator's
// configuration and secret files are kept.
func writePrivate(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
