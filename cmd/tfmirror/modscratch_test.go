package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestModuleScratchRemovedAtStart: what a killed process's module work
// left in the data directory (an unpacked tree, a spooled package, a
// local module's spool) is gone once the engine opens that directory
// again; the cache and other files stay.
func TestModuleScratchRemovedAtStart(t *testing.T) {
	dataDir := t.TempDir()
	left := []string{"tfmirror-module-1234", "tfmirror-module-99.tar.gz", "tfmirror-local-module-7.tar.gz", "tfmirror-module-check-5"}
	for _, name := range left {
		p := filepath.Join(dataDir, name)
		if filepath.Ext(name) == ".gz" {
			if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Join(p, "tree", "modules"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "tree", "modules", "main.tf"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	keep := filepath.Join(dataDir, "notes-module.txt")
	if err := os.WriteFile(keep, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	parts, _ := openOffline(t, "--data-dir", dataDir)
	defer parts.shutdown(context.Background())
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	for _, name := range left {
		if slices.Contains(names, name) {
			t.Errorf("%s is still in the data directory: %v", name, names)
		}
	}
	if !slices.Contains(names, "notes-module.txt") || !slices.Contains(names, "cache") {
		t.Errorf("data directory after start: %v, want the cache and other files kept", names)
	}
}
