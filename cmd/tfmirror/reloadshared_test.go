package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
)

// TestReloadRefusesASharedStoreARestartWouldRefuse: a start with
// shared_store loads the AWS configuration of its environment (the SDK's
// AWS_CONFIG_FILE, AWS_PROFILE, AWS_CA_BUNDLE) and refuses to start when
// it does not load. A reload of a file that adds shared_store keeps it
// for a restart: where that restart would refuse the AWS configuration,
// the reload is refused whole, saying why (never the credentials the
// configuration holds), the configuration in force stays, and config
// check refuses the file in that environment. Where the configuration
// loads, the reload is taken, shared_store kept for the restart.
func TestReloadRefusesASharedStoreARestartWouldRefuse(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false } // no TFMIRROR_ variables
	dir := t.TempDir()
	key := filepath.Join(dir, "shared.key")
	writePrivate(t, key, strings.Repeat("k", 40))
	const secret = "wJalrXUtnFEMIK7MDENGbPxRfiCYs3cretKEY"
	partial := filepath.Join(dir, "aws-config-partial")
	writePrivate(t, partial, "[default]\nregion = eu-west-1\naws_secret_access_key = "+secret+"\n")
	plain := filepath.Join(dir, "aws-config")
	writePrivate(t, plain, "[default]\nregion = eu-west-1\n")
	added := "log_level = \"debug\"\n" +
		"shared_store = \"s3://bucket/prefix?endpoint=http://127.0.0.1:9\"\n" +
		"shared_store_key_file = \"" + key + "\"\n"

	// environ sets the AWS variables of the process (the SDK reads no
	// other), the others as a machine without AWS configuration has them.
	environ := func(t *testing.T, vars map[string]string) {
		t.Helper()
		s3test.NoAWSConfig(t, map[string]string{"AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull})
		for k, v := range vars {
			t.Setenv(k, v)
		}
	}
	// start serves without shared_store, its reload reading the file
	// again as serve's does.
	start := func(t *testing.T) (m *server, conf string, args []string, level *slog.LevelVar) {
		t.Helper()
		d := t.TempDir()
		conf = filepath.Join(d, "tfmirror.hcl")
		writePrivate(t, conf, "log_level = \"info\"\n")
		args = []string{"--config", conf, "--data-dir", filepath.Join(d, "data"), "--insecure-http"}
		e, err := parseServeConfig(args, noEnv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		m, err = newServer(e.Config, slog.New(slog.DiscardHandler), overrides{})
		if err != nil {
			t.Fatalf("start without shared_store: %v", err)
		}
		t.Cleanup(func() { m.shutdown(context.Background()) })
		level = new(slog.LevelVar)
		if err := m.useConfig(e, reloadServeConfig(args, noEnv, e.Config), level); err != nil {
			t.Fatal(err)
		}
		return m, conf, args, level
	}
	// restartRefuses says whether a serve started with the file at conf
	// (on a data directory of its own) is refused, and why.
	restartRefuses := func(t *testing.T, args []string) error {
		t.Helper()
		e, err := parseServeConfig(args, noEnv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		e.Config.DataDir = t.TempDir()
		m, err := newServer(e.Config, slog.New(slog.DiscardHandler), overrides{})
		if err == nil {
			m.shutdown(context.Background())
		}
		return err
	}

	for _, tc := range []struct {
		name string
		vars map[string]string
		want string // in the reload's error
	}{
		{"a CA bundle that is not there", map[string]string{"AWS_CA_BUNDLE": filepath.Join(dir, "missing-ca.pem")}, "missing-ca.pem"},
		{"a config file whose profile holds half a key", map[string]string{"AWS_CONFIG_FILE": partial}, "partial credentials"},
		{"a profile the config file lacks", map[string]string{"AWS_CONFIG_FILE": plain, "AWS_PROFILE": "mirror"}, "profile, mirror"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			environ(t, tc.vars)
			m, conf, args, level := start(t)
			writePrivate(t, conf, added)
			if err := restartRefuses(t, args); err == nil {
				t.Fatal("a start with shared_store in this environment was taken, want it refused")
			}
			_, err := m.reload()
			if err == nil || !strings.Contains(err.Error(), "--shared-store") || !strings.Contains(err.Error(), "AWS") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("reload adding shared_store where a restart would refuse the AWS configuration: %v; want it refused naming --shared-store, the AWS configuration and %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("reload's error %q shows the secret access key", err)
			}
			if last := m.configuration().LastReload; last == nil || last.Applied {
				t.Errorf("last reload %+v, want it not applied", last)
			}
			if level.Level() != slog.LevelInfo {
				t.Errorf("log level %v after the refused reload, want the one in force (info)", level.Level())
			}
			if got := m.conf.Load().Current().Config.SharedStore; got != "" {
				t.Errorf("shared_store %q in the configuration in force after the refused reload, want none", got)
			}

			var stdout, stderr bytes.Buffer
			if code := runConfig([]string{"check", conf}, noEnv, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "--shared-store") || strings.Contains(stderr.String(), secret) {
				t.Errorf("config check: exit status %d, want 1 naming --shared-store without the secret:\n%s%s", code, stdout.String(), stderr.String())
			}
		})
	}

	t.Run("an AWS configuration that loads", func(t *testing.T) {
		environ(t, map[string]string{"AWS_CONFIG_FILE": plain})
		m, conf, args, level := start(t)
		writePrivate(t, conf, added)
		if err := restartRefuses(t, args); err != nil {
			t.Fatalf("a start with shared_store in this environment: %v, want it taken", err)
		}
		got, err := m.reload()
		if err != nil {
			t.Fatalf("reload adding shared_store where its AWS configuration loads: %v", err)
		}
		restart := false
		for _, s := range got.Settings {
			restart = restart || (s.Name == "shared-store" && s.Restart)
		}
		if !restart {
			t.Errorf("reload %+v: want shared-store kept for a restart", got.Settings)
		}
		if level.Level() != slog.LevelDebug {
			t.Errorf("log level %v after the reload, want debug", level.Level())
		}
	})
}
