package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
)

// TestReloadRefusesSettingsARestartWouldRefuse: settings that need a
// restart, which a start refuses though they parse (a listen address
// whose port is none, a data_dir that is a file or lies under one, a
// shared_store whose bucket and prefix, its store ID without
// shared_store_id, are no store ID), were kept by a reload for a restart
// that then failed, and passed config check. The reload is refused whole
// naming the setting at its line in the file, the configuration in force
// stays, and config check refuses the file the same way. Its settings
// put back, the reload is taken again.
func TestReloadRefusesSettingsARestartWouldRefuse(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false } // no TFMIRROR_ variables
	// The shared store's AWS configuration as a machine without one
	// has it: a start with shared_store loads it.
	s3test.NoAWSConfig(t, map[string]string{"AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull})
	dir := t.TempDir()
	key := filepath.Join(dir, "shared.key")
	writePrivate(t, key, strings.Repeat("k", 40))
	aFile := filepath.Join(dir, "a-file")
	writePrivate(t, aFile, "not a directory\n")
	shared := func(prefix string) string {
		return "shared_store = \"s3://bucket/" + prefix + "?endpoint=http://127.0.0.1:9\"\nshared_store_key_file = \"" + key + "\"\n"
	}

	for _, tc := range []struct {
		name    string
		setting string // the file's line 2
		flag    string // named by the errors
		want    string // in the errors too
		// refused says how a start refuses it, for the test to check
		// that it does (cfg, its data directory its own but for data_dir).
		refused func(t *testing.T, args []string, dataDir bool) error
	}{
		{"a listen port above 65535", "listen = \":99999\"\n", "--listen", "99999", listenRefused(":99999")},
		{"a metrics_listen port that is no service", "metrics_listen = \"127.0.0.1:no-such-service\"\n", "--metrics-listen", "no-such-service",
			listenRefused("127.0.0.1:no-such-service")},
		{"a data_dir that is a file", "data_dir = \"" + aFile + "\"\n", "--data-dir", aFile, startRefused},
		{"a data_dir under a file", "data_dir = \"" + filepath.Join(aFile, "data") + "\"\n", "--data-dir", aFile, startRefused},
		{"a shared_store whose bucket and prefix are too long a store ID", shared(strings.Repeat("p", 300)), "--shared-store", "store ID", startRefused},
		{"a shared_store whose prefix holds a control character", shared("pre%0Afix"), "--shared-store", "store ID", startRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			conf := filepath.Join(d, "tfmirror.hcl")
			before := "log_level = \"info\"\ndata_dir = \"" + filepath.Join(d, "data") + "\"\n"
			writePrivate(t, conf, before)
			args := []string{"--config", conf, "--insecure-http"}
			m, level := reloadingServer(t, args)

			writePrivate(t, conf, "log_level = \"debug\"\n"+tc.setting)
			if err := tc.refused(t, args, strings.HasPrefix(tc.setting, "data_dir")); err == nil {
				t.Fatalf("a start with %q was taken, want it refused", tc.setting)
			}
			_, err := m.reload()
			if err == nil || !strings.Contains(err.Error(), tc.flag) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), conf+":2") {
				t.Fatalf("reload of %q: %v; want it refused naming %s, %q and %s:2", tc.setting, err, tc.flag, tc.want, conf)
			}
			if last := m.configuration().LastReload; last == nil || last.Applied {
				t.Errorf("last reload %+v, want it not applied", last)
			}
			if level.Level() != slog.LevelInfo {
				t.Errorf("log level %v after the refused reload, want the one in force (info)", level.Level())
			}
			var stdout, stderr bytes.Buffer
			if code := runConfig([]string{"check", conf}, noEnv, &stdout, &stderr); code != 1 ||
				!strings.Contains(stderr.String(), tc.flag) || !strings.Contains(stderr.String(), conf+":2") {
				t.Errorf("config check of %q: exit status %d, want 1 naming %s at %s:2:\n%s%s", tc.setting, code, tc.flag, conf, stdout.String(), stderr.String())
			}

			// Put back: the reload is taken.
			writePrivate(t, conf, "log_level = \"debug\"\n"+strings.TrimPrefix(before, "log_level = \"info\"\n"))
			if _, err := m.reload(); err != nil {
				t.Fatalf("reload with the setting put back: %v", err)
			}
			if level.Level() != slog.LevelDebug {
				t.Errorf("log level %v after the reload, want debug", level.Level())
			}
		})
	}
}

// startRefused is the error of a start with args: the configuration
// read as serve reads it, then the server made, on a data directory of
// its own unless dataDir (the test's setting is data_dir).
func startRefused(t *testing.T, args []string, dataDir bool) error {
	t.Helper()
	e, err := parseServeConfig(args, func(string) (string, bool) { return "", false }, io.Discard)
	if err != nil {
		return err
	}
	if !dataDir {
		e.Config.DataDir = t.TempDir()
	}
	m, err := newServer(e.Config, slog.New(slog.DiscardHandler), overrides{})
	if err == nil {
		m.shutdown(context.Background())
	}
	return err
}

// listenRefused is how a start refuses the address addr: its listen
// (serve's net.Listen, once the server is made) fails on it.
func listenRefused(addr string) func(t *testing.T, args []string, _ bool) error {
	return func(*testing.T, []string, bool) error {
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			ln.Close()
		}
		return err
	}
}

// TestConfigCheckJudgesTheEnvironmentsOriginTokens: serve reads the
// TF_TOKEN_ variables of its environment at start, whatever its file
// says, and refuses to start on one that is empty or names no host.
// config check, which judges this environment's proxy variables as
// serve does, judges these too: the file is refused (exit status 1)
// naming the variable, never a token; with --skip-files it is not.
func TestConfigCheckJudgesTheEnvironmentsOriginTokens(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false } // no TFMIRROR_ variables
	dir := t.TempDir()
	conf := filepath.Join(dir, "tfmirror.hcl")
	writePrivate(t, conf, "data_dir = \""+filepath.Join(dir, "data")+"\"\n")
	const token = "s3cr3t-t0ken-value-for-the-registry"
	t.Setenv("TF_TOKEN_registry_example_com", token)
	t.Setenv("TF_TOKEN_", "another-"+token)

	if err := startRefused(t, []string{"--config", conf, "--insecure-http"}, false); err == nil || !strings.Contains(err.Error(), "TF_TOKEN_") {
		t.Fatalf("a start with TF_TOKEN_ naming no host: %v, want it refused naming the variable", err)
	}
	var stdout, stderr bytes.Buffer
	code := runConfig([]string{"check", conf}, noEnv, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "TF_TOKEN_ does not name a valid host") || strings.Contains(stderr.String(), token) {
		t.Errorf("config check with TF_TOKEN_ naming no host: exit status %d, want 1 naming the variable, never its token:\n%s%s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := runConfig([]string{"check", "--skip-files", conf}, noEnv, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "TF_TOKEN_") {
		t.Errorf("config check --skip-files: exit status %d, want 0 saying the TF_TOKEN_ variables were not checked:\n%s%s", code, stdout.String(), stderr.String())
	}
}
