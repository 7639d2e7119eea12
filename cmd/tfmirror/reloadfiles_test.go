package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/releases"
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

	creds := filepath.Join(dir, "credentials.tfrc")
	write("log_level = \"debug\"\ncredentials_file = \"" + creds + "\"\n")
	if _, err := m.reload(); err == nil || !strings.Contains(err.Error(), "--credentials-file") || !strings.Contains(err.Error(), creds) {
		t.Fatalf("reload naming a credentials file that is not there: %v, want it refused naming --credentials-file and the file", err)
	}
	if last := m.configuration().LastReload; last == nil || last.Applied {
		t.Errorf("last reload %+v, want it not applied", last)
	}
	if level.Level() != slog.LevelInfo {
		t.Errorf("log level %v after the refused reload, want the one in force (info)", level.Level())
	}

	// The file in place: the reload is taken, the file kept for a restart.
	if err := os.WriteFile(creds, []byte("credentials \"registry.example.com\" {\n  token = \"t\"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := m.reload()
	if err != nil {
		t.Fatalf("reload with the credentials file in place: %v", err)
	}
	if level.Level() != slog.LevelDebug {
		t.Errorf("log level %v after the reload, want debug", level.Level())
	}
	restart := false
	for _, s := range got.Settings {
		restart = restart || (s.Name == "credentials-file" && s.Restart)
	}
	if !restart {
		t.Errorf("reload %+v: want credentials-file kept for a restart", got.Settings)
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

// TestReloadRefusesReleaseKeysARestartWouldRefuse: a keys file for the
// CLI releases that holds a block that is no OpenPGP key (the armor's
// header, and not a key within it) is read, and the CLI releases side
// refuses it at start. A reload of a file naming it keeps it for a
// restart that would then fail: the reload is refused naming the
// setting and the file, the configuration in force stays, and config
// check refuses the file. Once the file holds a key, the reload is taken,
// the change kept for the restart.
func TestReloadRefusesReleaseKeysARestartWouldRefuse(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	dir := t.TempDir()
	conf := filepath.Join(dir, "tfmirror.hcl")
	writePrivate(t, conf, "log_level = \"info\"\n")
	args := []string{"--config", conf, "--data-dir", filepath.Join(dir, "data")}
	m, level := reloadingServer(t, args)

	keys := filepath.Join(dir, "hashicorp.asc")
	writePrivate(t, keys, "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nnot a key\n-----END PGP PUBLIC KEY BLOCK-----\n")
	writePrivate(t, conf, "log_level = \"debug\"\nreleases_hashicorp_keys = \""+keys+"\"\n")
	e, err := parseServeConfig(args, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	e.Config.DataDir = t.TempDir()
	if s, err := newServer(e.Config, slog.New(slog.DiscardHandler), overrides{}); err == nil {
		s.shutdown(context.Background())
		t.Fatal("a start with a keys file holding no key was taken, want it refused")
	}
	if _, err := m.reload(); err == nil || !strings.Contains(err.Error(), "--releases-hashicorp-keys") || !strings.Contains(err.Error(), keys) {
		t.Fatalf("reload naming a keys file that holds no key: %v, want it refused naming --releases-hashicorp-keys and the file", err)
	}
	if last := m.configuration().LastReload; last == nil || last.Applied {
		t.Errorf("last reload %+v, want it not applied", last)
	}
	if level.Level() != slog.LevelInfo {
		t.Errorf("log level %v after the refused reload, want the one in force (info)", level.Level())
	}
	var stdout, stderr bytes.Buffer
	if code := runConfig([]string{"check", conf}, noEnv, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "--releases-hashicorp-keys") {
		t.Errorf("config check: exit status %d, want 1 naming --releases-hashicorp-keys:\n%s%s", code, stdout.String(), stderr.String())
	}

	// A key in the file: the reload is taken, the keys kept for a restart.
	writePrivate(t, keys, releases.HashiCorpKey)
	got, err := m.reload()
	if err != nil {
		t.Fatalf("reload with a key in the file: %v", err)
	}
	if level.Level() != slog.LevelDebug {
		t.Errorf("log level %v after the reload, want debug", level.Level())
	}
	restart := false
	for _, s := range got.Settings {
		restart = restart || (s.Name == "releases-hashicorp-keys" && s.Restart)
	}
	if !restart {
		t.Errorf("reload %+v: want releases-hashicorp-keys kept for a restart", got.Settings)
	}
}

// TestReloadRefusesADataDirSigningKeyARestartWouldRefuse: with client
// tokens and no url_signing_key_file, a start reads the URL-signing key
// in the data directory, and refuses one too short (left there, or
// written by hand). A reload that drops url_signing_key_file keeps that
// for a restart that would then fail: the reload is refused naming the
// key's path, and config check refuses it too. Once the key is gone (a
// start makes a new one), the reload is taken.
func TestReloadRefusesADataDirSigningKeyARestartWouldRefuse(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "tokens")
	writePrivate(t, tokens, "0123456789abcdef0123456789abcdef\n")
	signing := filepath.Join(dir, "signing.key")
	writePrivate(t, signing, strings.Repeat("k", 32))
	conf := filepath.Join(dir, "tfmirror.hcl")
	writePrivate(t, conf, "data_dir = \""+data+"\"\nauth_tokens_file = \""+tokens+"\"\nurl_signing_key_file = \""+signing+"\"\n")
	args := []string{"--config", conf}
	m, _ := reloadingServer(t, args)

	short := filepath.Join(data, signingKeyName)
	writePrivate(t, short, "too short")
	writePrivate(t, conf, "data_dir = \""+data+"\"\nauth_tokens_file = \""+tokens+"\"\n")
	e, err := parseServeConfig(args, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := newServer(e.Config, slog.New(slog.DiscardHandler), overrides{}); err == nil {
		s.shutdown(context.Background())
		t.Fatal("a start reading a 9-byte URL-signing key in the data directory was taken, want it refused")
	}
	if _, err := m.reload(); err == nil || !strings.Contains(err.Error(), short) || !strings.Contains(err.Error(), "9 bytes") {
		t.Fatalf("reload dropping url_signing_key_file before a 9-byte key in the data directory: %v, want it refused naming %s", err, short)
	}
	if last := m.configuration().LastReload; last == nil || last.Applied {
		t.Errorf("last reload %+v, want it not applied", last)
	}
	var stdout, stderr bytes.Buffer
	if code := runConfig([]string{"check", conf}, noEnv, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), short) {
		t.Errorf("config check: exit status %d, want 1 naming %s:\n%s%s", code, short, stdout.String(), stderr.String())
	}

	if err := os.Remove(short); err != nil {
		t.Fatal(err)
	}
	if _, err := m.reload(); err != nil {
		t.Fatalf("reload with no key in the data directory (a start makes one): %v", err)
	}
	if _, err := os.Stat(short); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the reload wrote %s (%v); want it left to a start", short, err)
	}
}
