package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io/fs"
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

// TestImportOfNoTarFileMakesNothing: a file given to `tfmirror import`
// that is no tar file (gzip-compressed or not) is refused saying so,
// before the data directory is made, where the import had made and
// opened it, then said only "unexpected EOF". A tar file of no entry,
// which holds nothing to import, is refused there too: it had made the
// data directory before the import refused it.
func TestImportOfNoTarFileMakesNothing(t *testing.T) {
	t.Parallel()
	in := t.TempDir()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("a gzip-compressed text, not a tar file"))
	zw.Close()
	for name, content := range map[string][]byte{"text.tar": []byte("hello\n"), "text.tgz": gz.Bytes(), "cut.tar.gz": gz.Bytes()[:12]} {
		path := filepath.Join(in, name)
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		dataDir := filepath.Join(t.TempDir(), "data")
		var stdout, stderr bytes.Buffer
		code := runImport([]string{"--data-dir", dataDir, path}, &stdout, &stderr)
		if want := path + " refused: not a tar file, gzip-compressed or not"; code != 1 || !strings.Contains(stderr.String(), want) {
			t.Errorf("%s: exit status %d, stderr %q, want 1 and %q", name, code, stderr.String(), want)
		}
		if _, err := os.Stat(dataDir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: the data directory was made (%v)", name, err)
		}
	}

	var empty bytes.Buffer
	tar.NewWriter(&empty).Close()
	path := filepath.Join(in, "empty.tar")
	if err := os.WriteFile(path, empty.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	data := filepath.Join(t.TempDir(), "data")
	if code := runImport([]string{"--data-dir", data, path}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "empty.tar refused: a tar file of no entry: it holds no provider packages") {
		t.Errorf("a tar file of no entry: exit status %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("a tar file of no entry: the data directory was made (%v)", err)
	}
}
