//go:build unix

package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/admin"
)

// TestTokensReloadRefusesWhatIsNoFile replaces the client tokens file
// with what is no regular file and reloads (SIGHUP, tfmirror reload): a
// FIFO, which an open for reading would wait on for a writer for ever
// (the reload, every later one and the shutdown that waits for the
// SIGHUP goroutine with it), and a directory, are refused at once with
// what they are, and the tokens in force stay; a link to a regular file
// (a mounted Secret's) still reloads.
func TestTokensReloadRefusesWhatIsNoFile(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	const token = "0123456789abcdef0123456789abcdef"
	if err := os.WriteFile(tokens, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := authFlags(t, "--data-dir", filepath.Join(dir, "data"), "--auth-tokens-file", tokens)
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	auth, err := loadAuth(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := &server{cfg: cfg, log: slog.New(slog.DiscardHandler), auth: auth}

	// reload runs m.reload, failing the test (and letting the reload go)
	// when it does not return in time.
	reload := func(t *testing.T) (admin.Reloaded, error) {
		t.Helper()
		type result struct {
			res admin.Reloaded
			err error
		}
		done := make(chan result, 1)
		go func() {
			res, err := m.reload()
			done <- result{res, err}
		}()
		select {
		case r := <-done:
			return r.res, r.err
		case <-time.After(time.Minute): // a reload takes milliseconds; a wait on a FIFO never ends
			// Give the open a writer, and the file an end, so that the
			// reload's goroutine returns.
			if w, err := os.OpenFile(tokens, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
			<-done
			t.Fatal("the reload waited for a minute on the tokens file")
			return admin.Reloaded{}, nil
		}
	}
	replace := func(t *testing.T, make func(path string) error) {
		t.Helper()
		if err := os.RemoveAll(tokens); err != nil {
			t.Fatal(err)
		}
		if err := make(tokens); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, kind string
		make       func(path string) error
	}{
		{"fifo", "a FIFO", func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		{"directory", "a directory", func(p string) error { return os.Mkdir(p, 0o700) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replace(t, tc.make)
			_, err := reload(t)
			if err == nil {
				t.Fatalf("reload with %s in place of the tokens file succeeded", tc.kind)
			}
			if msg := err.Error(); !strings.Contains(msg, tokens) || !strings.Contains(msg, tc.kind) || !strings.Contains(msg, "the tokens in force stay") {
				t.Errorf("reload error %q: want the file, %q and that the tokens in force stay", msg, tc.kind)
			}
		})
	}
	t.Run("link to a file", func(t *testing.T) {
		target := filepath.Join(dir, "tokens.real")
		if err := os.WriteFile(target, []byte(token+"\n"+strings.Repeat("f", 32)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		replace(t, func(p string) error { return os.Symlink(target, p) })
		res, err := reload(t)
		if err != nil {
			t.Fatal(err)
		}
		if res.Tokens == nil || *res.Tokens != 2 {
			t.Errorf("tokens in force after the reload: %v, want 2", res.Tokens)
		}
	})
}
