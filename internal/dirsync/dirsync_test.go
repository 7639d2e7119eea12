package dirsync

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// A directory is synced; what is no directory there is an error, not a
// sync said done.
func TestSync(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Sync(dir); err != nil {
		t.Errorf("Sync(%s): %v", dir, err)
	}
	if err := Sync(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Sync of a missing directory: %v, want fs.ErrNotExist", err)
	}
}
