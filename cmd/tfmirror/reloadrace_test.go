package main

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReloadsAtOnceLeaveTheNewestInForce runs two reloads at once (a
// SIGHUP and tfmirror reload, or two operators): the first reads a client
// tokens file that takes a while to read; the file is then replaced by
// one without the token it held (revoking it) and the second reload
// runs. Whatever their order, once both are done the tokens in force are
// those of the file on disk: the first reload may not put the file it
// read in force over the second's.
func TestReloadsAtOnceLeaveTheNewestInForce(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	const revoked, kept = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	// The old file: the token to revoke, and comments that take the
	// reading a while (within the bound of a tokens file).
	var old strings.Builder
	old.WriteString(revoked + "\n" + kept + "\n")
	line := "# " + strings.Repeat("x", 78) + "\n"
	for old.Len() < maxTokensFileBytes-len(line) {
		old.WriteString(line)
	}
	if err := os.WriteFile(tokens, []byte(old.String()), 0o600); err != nil {
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

	first := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := m.reload()
		first <- err
	}()
	// Let the first reload open the old file, then revoke the token by
	// replacing the file, and reload again.
	time.Sleep(20 * time.Millisecond)
	next := filepath.Join(dir, "tokens.new")
	if err := os.WriteFile(next, []byte(kept+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(next, tokens); err != nil {
		t.Fatal(err)
	}
	res, err := m.reload()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	t.Logf("both reloads done in %v; the second reported %d tokens", time.Since(start), *res.Tokens)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	if m.auth.CheckToken(r, revoked) {
		t.Error("after both reloads the token removed from the file on disk is still accepted: the first reload put the file it read in force over the second's")
	}
	if !m.auth.CheckToken(r, kept) {
		t.Error("after both reloads the token of the file on disk is refused")
	}
}
