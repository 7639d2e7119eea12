package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReloadRefusesAFileARestartWouldRefuse: a reload that changes a
// setting needing a restart to name a file that is missing (or that the
// start refuses) is refused, naming the setting and the file, and the
// configuration in force stays: it was said to be kept for a restart,
// and the restart then failed. Once the file is there, the reload is
// taken, the change kept for the restart.
func TestReloadRefusesAFileARestartWouldRefuse(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "tfmirror.hcl")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("log_level = \"info\"\n")
	args := []string{"--config", conf, "--data-dir", filepath.Join(dir, "data")}
	m, level := reloadingServer(t, args)

	ca := filepath.Join(dir, "corp-ca.pem")
	write("log_level = \"debug\"\norigin_ca_file = [\"" + ca + "\"]\n")
	if _, err := m.reload(); err == nil || !strings.Contains(err.Error(), "--origin-ca-file") || !strings.Contains(err.Error(), ca) {
		t.Fatalf("reload naming a CA file that is not there: %v, want it refused naming --origin-ca-file and the file", err)
	}
	if last := m.configuration().LastReload; last == nil || last.Applied {
		t.Errorf("last reload %+v, want it not applied", last)
	}
	if level.Level() != slog.LevelInfo {
		t.Errorf("log level %v after the refused reload, want the one in force (info)", level.Level())
	}

	// The file in place: the reload is taken, the CA kept for a restart.
	pem, err := os.ReadFile(filepath.Join(dir, "data", "tls", "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := m.reload()
	if err != nil {
		t.Fatalf("reload with the CA file in place: %v", err)
	}
	if level.Level() != slog.LevelDebug {
		t.Errorf("log level %v after the reload, want debug", level.Level())
	}
	restart := false
	for _, s := range got.Settings {
		restart = restart || (s.Name == "origin-ca-file" && s.Restart)
	}
	if !restart {
		t.Errorf("reload %+v: want origin-ca-file kept for a restart", got.Settings)
	}
}

// reloadingServer makes a server of args as serve does, with the
// configuration they give in force and a reload reading it again as
// serve's does (reloadServeConfig), shut down when the test ends. It
// returns the server and its log level, which a reload sets.
func reloadingServer(t *testing.T, args []string) (*server, *slog.LevelVar) {
	t.Helper()
	noEnv := func(string) (string, bool) { return "", false }
	e, err := parseServeConfig(args, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m, err := newServer(e.Config, slog.New(slog.DiscardHandler), overrides{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.shutdown(context.Background()) })
	level := new(slog.LevelVar)
	if err := m.useConfig(e, reloadServeConfig(args, noEnv, e.Config), level); err != nil {
		t.Fatal(err)
	}
	return m, level
}
