//go:build !windows && !plan9 && !js && !wasip1 && !aix

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestExportIntoADirectoryAnotherProcessWrites: `tfmirror export` into a
// directory another process's export is writing (its lock held) exits 1
// at once naming it, and writes nothing there; once the other is done,
// the same export runs.
func TestExportIntoADirectoryAnotherProcessWrites(t *testing.T) {
	t.Parallel()
	dataDir := emptyCacheIn(t, t.TempDir()) // an empty cache
	out := filepath.Join(t.TempDir(), "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := runExport([]string{"--data-dir", dataDir, out}, &stdout, &stderr)
	t.Logf("export: exit %d\n%s%s", code, stdout.String(), stderr.String())
	if code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	if want := "another export is writing into " + out; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q", want)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("the refused export left %v", entries)
	}
	lock.Close()
	stdout.Reset()
	stderr.Reset()
	if code := runExport([]string{"--data-dir", dataDir, out}, &stdout, &stderr); code != 0 {
		t.Errorf("export once the other is done: exit %d, want 0\n%s%s", code, stdout.String(), stderr.String())
	}
}
