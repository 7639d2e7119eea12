package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnreadableCacheSaysWhatToDo: a data directory whose cache the
// database cannot read (its manifest damaged, or of a format this release
// does not read) is refused with an error that says so and what to do,
// not only the database's words ("manifest has bad magic"), and the files
// are left as they were.
func TestUnreadableCacheSaysWhatToDo(t *testing.T) {
	for name, manifest := range map[string][]byte{
		"garbled": []byte("not a manifest at all"),
		"empty":   {},
		"newer":   {'B', 'd', 'g', 'r', 0, 0, 0, 99, 0, 0, 0, 0, 0, 0, 0, 0},
	} {
		t.Run(name, func(t *testing.T) {
			dataDir := filepath.Join(t.TempDir(), "data")
			parts, cfg := openOffline(t, "--data-dir", dataDir)
			if err := parts.shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dataDir, "cache", "MANIFEST")
			if err := os.WriteFile(path, manifest, 0o600); err != nil {
				t.Fatal(err)
			}
			again, err := openEngine(cfg, discardLogger(), overrides{}, nil, nil)
			if err == nil {
				again.shutdown(context.Background())
				t.Fatal("a cache with an unreadable manifest was opened")
			}
			cacheDir := filepath.Join(dataDir, "cache")
			for _, want := range []string{"could not be read", "damaged", "format this release does not read", "move " + cacheDir + " aside", "imported again"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the open said %q; want it to say %q", err, want)
				}
			}
			if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, manifest) {
				t.Errorf("the manifest refused was changed: %q, %v", got, err)
			}
		})
	}
}
