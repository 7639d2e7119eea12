package main

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
)

func authFlags(t *testing.T, args ...string) settings.Config {
	t.Helper()
	cfg, err := parseServeFlags(args, func(string) (string, bool) { return "", false }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestLoadAuthErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("tokens", "0123456789abcdef0123456789abcdef\n")
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "missing tokens file", args: []string{"--auth-tokens-file", filepath.Join(dir, "nope")}, wantErr: "--auth-tokens-file"},
		{name: "empty tokens file", args: []string{"--auth-tokens-file", write("empty", "# none\n\n")}, wantErr: "no tokens"},
		{name: "short token", args: []string{"--auth-tokens-file", write("short-token", "# ci\ntok\n")}, wantErr: filepath.Join(dir, "short-token") + ":2: a token of 3 characters is too short"},
		{name: "short signing key", args: []string{"--auth-tokens-file", good, "--url-signing-key-file", write("short", "0123456789")}, wantErr: "at least 32"},
		{name: "missing signing key", args: []string{"--auth-tokens-file", good, "--url-signing-key-file", filepath.Join(dir, "nokey")}, wantErr: "--url-signing-key-file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := authFlags(t, append([]string{"--data-dir", t.TempDir()}, tc.args...)...)
			_, err := loadAuth(cfg, nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.wantErr)
			}
			// serve refuses it before it makes anything of its data
			// directory (it made the cache and a CA first).
			data := filepath.Join(t.TempDir(), "data")
			var stderr strings.Builder
			args := append([]string{"serve", "--data-dir", data, "--listen", "127.0.0.1:0", "--metrics-listen", ""}, tc.args...)
			if code := run(args, io.Discard, &stderr); code == 0 || !strings.Contains(stderr.String(), tc.wantErr) {
				t.Errorf("serve: exit %d\n%s\nwant refused, mentioning %q", code, stderr.String(), tc.wantErr)
			}
			if _, err := os.Stat(data); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("serve made its data directory before refusing: %v", err)
			}
		})
	}
	_, err := parseServeFlags([]string{"--url-signing-key-file", good}, func(string) (string, bool) { return "", false }, io.Discard)
	if err == nil {
		t.Error("--url-signing-key-file without --auth-tokens-file accepted")
	}
	_, err = parseServeFlags([]string{"--signed-url-ttl", "0s"}, func(string) (string, bool) { return "", false }, io.Discard)
	if err == nil {
		t.Error("--signed-url-ttl 0 accepted")
	}
	if a, err := loadAuth(authFlags(t), nil, nil); a != nil || err != nil {
		t.Errorf("without --auth-tokens-file: %v, %v; want no authentication", a, err)
	}
}

func TestSigningKeyPersistsInDataDir(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, signingKeyName)
	first, err := dataDirKey(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	if len(first) != 32 || bytes.Equal(first, make([]byte, 32)) {
		t.Errorf("generated key %x is not 32 random bytes", first)
	}
	again, err := dataDirKey(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, again) {
		t.Error("a restart generated a new key: signed URLs would not survive it")
	}
	other, err := dataDirKey(filepath.Join(t.TempDir(), signingKeyName), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(first, other) {
		t.Error("two data directories got the same key")
	}
}

// TestSigningKeyMadeOnceByConcurrentStarts: processes starting on one
// new data directory at once end up with one key, and none of them
// reads the key before it is written whole (an empty or short key file
// would stop that start).
func TestSigningKeyMadeOnceByConcurrentStarts(t *testing.T) {
	t.Parallel()
	for range 20 {
		dir := t.TempDir()
		path := filepath.Join(dir, signingKeyName)
		keys := make([][]byte, 8)
		errs := make([]error, len(keys))
		var wg sync.WaitGroup
		for i := range keys {
			wg.Go(func() { keys[i], errs[i] = dataDirKey(path, slog.New(slog.DiscardHandler)) })
		}
		wg.Wait()
		for i := range keys {
			if errs[i] != nil {
				t.Fatalf("start %d: %v", i, errs[i])
			}
			if !bytes.Equal(keys[i], keys[0]) {
				t.Fatalf("start %d read key %x, start 0 %x: two keys for one data directory", i, keys[i], keys[0])
			}
		}
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) != 1 {
			t.Fatalf("the data directory holds %v (%v), want the key alone", entries, err)
		}
	}
}
