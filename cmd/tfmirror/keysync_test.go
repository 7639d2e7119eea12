package main

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

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

// TestNewKeyLeftoversGo: a process killed while it wrote a key left its
// file of its own beside the key's name (`.export-key.asc.new-*`, a
// private key in it); the next start removes it, whether it makes the key
// or reads the one made since, and leaves one that may be another
// process's making the key at this moment.
func TestNewKeyLeftoversGo(t *testing.T) {
	t.Parallel()
	for _, made := range []bool{false, true} {
		dir := t.TempDir()
		if made {
			if _, _, err := ensureDataDirKey(dir, slog.New(slog.DiscardHandler)); err != nil {
				t.Fatal(err)
			}
		}
		left := filepath.Join(dir, "."+settings.ExportKeyName+".new-123")
		fresh := filepath.Join(dir, "."+settings.ExportKeyName+".new-456")
		other := filepath.Join(dir, ".other.new-789")
		for _, p := range []string{left, fresh, other} {
			if err := os.WriteFile(p, []byte("-----BEGIN PGP PRIVATE KEY BLOCK-----"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		long := time.Now().Add(-time.Hour)
		for _, p := range []string{left, other} {
			if err := os.Chtimes(p, long, long); err != nil {
				t.Fatal(err)
			}
		}
		if _, created, err := ensureDataDirKey(dir, slog.New(slog.DiscardHandler)); err != nil || created == made {
			t.Fatalf("ensureDataDirKey, the key made before %v: created %v, %v", made, created, err)
		}
		if _, err := os.Lstat(left); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the key made before %v: %s, left by a killed process an hour ago: %v, want removed", made, left, err)
		}
		for _, p := range []string{fresh, other} {
			if _, err := os.Lstat(p); err != nil {
				t.Errorf("the key made before %v: %s: %v, want kept", made, p, err)
			}
		}
	}
}
