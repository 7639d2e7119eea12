package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoReloadOnceShutDown: once serve has shut the engine and the cache
// down because it failed on its own (a server of its returned an error,
// so that the signal context is not done and a SIGHUP is still taken), a
// reload is refused, saying the mirror is shutting down, and puts
// nothing in force: it ran against the closed parts (with a generated
// certificate, it could issue one after the cache's lock was let go).
func TestNoReloadOnceShutDown(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "tfmirror.hcl")
	if err := os.WriteFile(conf, []byte("log_level = \"info\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, level := reloadingServer(t, []string{"--config", conf, "--data-dir", filepath.Join(dir, "data")})
	m.shutdownAfterServing()

	if err := os.WriteFile(conf, []byte("log_level = \"debug\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := m.reload(); err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("reload after the shutdown: %v, want it refused as the mirror is shutting down", err)
	}
	if level.Level() != slog.LevelInfo {
		t.Errorf("log level %v after the refused reload, want info kept", level.Level())
	}
}
