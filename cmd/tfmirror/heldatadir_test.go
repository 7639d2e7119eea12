package main

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestHeldDataDirSaysWhatToDo: opening a data directory whose cache
// another process (or another open in this one) holds fails with an error
// that says what holds it and what to do, not only the database's words.
func TestHeldDataDirSaysWhatToDo(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the cache's directory lock is Badger's own there")
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	parts, cfg := openOffline(t, "--data-dir", dataDir)
	defer parts.shutdown(context.Background())
	second, err := openEngine(cfg, discardLogger(), overrides{}, nil, nil)
	if err == nil {
		second.shutdown(context.Background())
		t.Fatal("a second open of a held data directory succeeded")
	}
	for _, want := range []string{"Another process is using this Badger database", "another tfmirror holds the data directory " + dataDir, "--data-dir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the second open said %q; want it to say %q", err, want)
		}
	}
}
