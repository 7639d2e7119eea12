package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestDeepBundleImportProcess: `tfmirror import` of a tar file whose one
// entry is nested 300,000 directories deep (a 600 kB name in its
// extended header, past the bound of an entry's headers; the file is a
// few kB) is refused at once, leaving nothing unpacked, and so is one of
// a name within that bound but longer than a path is taken; before,
// unpacking it would not end (making a name d directories deep cost some
// d² system calls).
func TestDeepBundleImportProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	work := t.TempDir()
	for _, tc := range []struct {
		name    string
		entries []fakeorigin.TarEntry
		args    []string
		want    string
	}{
		{"deep", []fakeorigin.TarEntry{{Name: strings.Repeat("a/", 300_000) + "f", Body: "x"}}, nil, "headers run on for more than 65536 bytes"},
		{"long", []fakeorigin.TarEntry{{Name: strings.Repeat("a/", 3_000) + "f", Body: "x"}}, nil, "more than the 4096 taken"},
		{"deeper than 64", []fakeorigin.TarEntry{{Name: strings.Repeat("a/", 100) + "f", Body: "x"}}, nil, "nested 101 deep"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bundle := filepath.Join(work, tc.name+".tar.gz")
			if err := os.WriteFile(bundle, fakeorigin.TarGzEntries(tc.entries), 0o644); err != nil {
				t.Fatal(err)
			}
			dataDir := filepath.Join(t.TempDir(), "data")
			start := time.Now()
			args := append([]string{"import", "--data-dir", dataDir}, tc.args...)
			_, stderr, code := runProcess(t, bin, work, append(args, bundle)...)
			if code != 1 || !strings.Contains(stderr, tc.want) {
				t.Errorf("import exited %d, want 1 and %q", code, tc.want)
			}
			// "At once" against the hours the d² system calls took: a
			// process of a race build on a loaded machine may take tens
			// of seconds just to start and exit.
			if d := time.Since(start); d > 2*time.Minute {
				t.Errorf("refused after %v", d)
			}
			ents, _ := os.ReadDir(dataDir)
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), ".tfmirror-import-") {
					t.Errorf("left %s in the data directory", e.Name())
				}
			}
		})
	}
}

// TestDirectoryImportFollowsNoLinkOutProcess: `tfmirror import
// --allow-unsigned` of a directory whose module system directory is a link
// to a directory elsewhere on the host (holding a key in a version-named
// directory) imports the module inside the directory only; before, the
// key was packed into a module package and served.
func TestDirectoryImportFollowsNoLinkOutProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	victim := t.TempDir()
	in := t.TempDir()
	for path, data := range map[string]string{
		filepath.Join(victim, "1.0.0", "export-key.asc"):                                                  "-----BEGIN PGP PRIVATE KEY BLOCK-----\n",
		filepath.Join(in, "modules", "tf.corp.example", "platform", "network", "aws", "1.2.0", "main.tf"): "# inside\n",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	leak := filepath.Join(in, "modules", "tf.corp.example", "platform", "leak", "aws")
	if err := os.MkdirAll(filepath.Dir(leak), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, leak); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	stdout, _, code := runProcess(t, bin, in, "import", "--data-dir", dataDir, "--allow-unsigned", in)
	if code != 0 || !strings.Contains(stdout, "modules: 1 packages imported") {
		t.Errorf("import exited %d, want 0 with the one module inside the directory imported", code)
	}
}
