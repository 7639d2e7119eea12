package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportShowsNoControlCharacters: the names of a directory given to
// `tfmirror import` are a stranger's, and the import reports some of
// them (a zip not named as a package, a directory that is no provider
// address): their control characters reach the operator's terminal as
// escapes, never as the escape sequences (a title, the clipboard, a
// cleared screen) the terminal would obey.
func TestImportShowsNoControlCharacters(t *testing.T) {
	t.Parallel()
	in := t.TempDir()
	dir := filepath.Join(in, "registry.terraform.io", "acme", "net")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(in, "registry.terraform.io", "acme", "\x1b[2Jbad"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "title\x1b]0;owned\x07.zip"), []byte("zip"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := runImport([]string{"--data-dir", t.TempDir(), in}, &stdout, &stderr)
	t.Logf("import: exit %d\n%s%s", code, stdout.String(), stderr.String())
	if code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	out := stdout.String() + stderr.String()
	if strings.ContainsAny(out, "\x1b\x07") {
		t.Errorf("the import wrote control characters of the input's names to the terminal: %q", out)
	}
	for _, want := range []string{`title\x1b]0;owned\x07.zip`, `\x1b[2Jbad`} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr does not name %s", want)
		}
	}
}
