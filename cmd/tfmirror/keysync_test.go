package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
)

// TestNewKeyNameIsSynced: the export key made in the data directory is
// on disk under its name once it is made, its directory synced after the
// key took its name: a power loss after its public half was handed out
// (`tfmirror export-key`) does not lose it, nor have the next start make
// another that the importing side has never seen. Not parallel: it
// replaces syncDir.
func TestNewKeyNameIsSynced(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, settings.ExportKeyName)
	var synced []string
	old := syncDir
	t.Cleanup(func() { syncDir = old })
	syncDir = func(d string) error {
		if _, err := os.Lstat(path); err != nil {
			t.Errorf("%s synced before the key took its name: %v", d, err)
		}
		synced = append(synced, d)
		return old(d)
	}
	if _, created, err := ensureDataDirKey(dir, slog.New(slog.DiscardHandler)); err != nil || !created {
		t.Fatalf("ensureDataDirKey: created %v, %v", created, err)
	}
	if len(synced) != 1 || synced[0] != dir {
		t.Errorf("directories synced once the key was made: %q, want %s", synced, dir)
	}
}
