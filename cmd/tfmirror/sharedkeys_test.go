package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
)

// A shared store key file that holds no usable key is named with its own
// setting, serve's and config check's: a short previous key is the fault
// of --shared-store-previous-key-file (at its line), not of the current
// key's file, which the error named before.
func TestSharedStoreKeyErrorsNameTheirFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good, short := write("current.key", strings.Repeat("k", 32)), write("previous.key", "short\n")
	cfg := settings.Config{SharedStore: "s3://bucket/prefix", SharedKeyFile: good, SharedPrevKeyFile: short}
	_, err := openShared(context.Background(), cfg, nil, slog.New(slog.DiscardHandler), nil)
	if err == nil || !strings.HasPrefix(err.Error(), "--shared-store-previous-key-file: ") || !strings.Contains(err.Error(), short) ||
		strings.Contains(err.Error(), good) {
		t.Errorf("serve: %v; want --shared-store-previous-key-file naming %s", err, short)
	}

	conf := write("tfmirror.hcl", strings.Join([]string{
		`shared_store = "s3://bucket/prefix"`,
		`shared_store_key_file = "` + good + `"`,
		`shared_store_previous_key_file = "` + short + `"`,
	}, "\n")+"\n")
	noEnv := func(string) (string, bool) { return "", false }
	var stdout, stderr bytes.Buffer
	if code := runConfig([]string{"check", conf}, noEnv, &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), conf+":3,") || !strings.Contains(stderr.String(), "--shared-store-previous-key-file") ||
		strings.Contains(stderr.String(), conf+":2,") {
		t.Errorf("config check: exit status %d, want 1 and the error at line 3\n%s%s", code, stdout.String(), stderr.String())
	}
}
