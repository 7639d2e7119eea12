package modsource

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// packTree writes files (name -> content; a content "-> TARGET" makes a
// link, a name ending in "*" an executable) under a new directory and
// packs it as Fetch packs a package.
func packTree(t *testing.T, files map[string]string) []byte {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, "*") {
			name, mode = strings.TrimSuffix(name, "*"), 0o755
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(data, "-> "); ok {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := PackDir(context.Background(), dir, t.TempDir(), &buf, Limits{}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// zipListing reads a zip as "NAME MODE CONTENT" lines, checking every
// entry's time.
func zipListing(t *testing.T, b []byte) []string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range zr.File {
		if !f.Modified.Equal(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)) || f.Method != zip.Store {
			t.Errorf("%s: time %v, method %d", f.Name, f.Modified, f.Method)
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f.Name+" "+f.Mode().String()+" "+string(data))
	}
	return out
}

// WriteZip writes the package's files sorted, with fixed modes and
// times, the same bytes every time, links resolved into copies.
func TestWriteZip(t *testing.T) {
	pkg := packTree(t, map[string]string{
		"main.tf":          "# main\n",
		"run.sh*":          "#!/bin/sh\n",
		"modules/a/a.tf":   "# a\n",
		"modules/a-b/b.tf": "# b\n",
		"alias.tf":         "-> main.tf",
		"shared":           "-> modules/a",
		"modules/a/up.tf":  "-> ../../main.tf",
		"gone.tf":          "-> missing.tf",
		"empty/":           "",
	})
	var z1, z2 bytes.Buffer
	res, err := WriteZip(context.Background(), bytes.NewReader(pkg), &z1, t.TempDir(), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WriteZip(context.Background(), bytes.NewReader(pkg), &z2, t.TempDir(), Limits{}); err != nil || !bytes.Equal(z1.Bytes(), z2.Bytes()) {
		t.Fatalf("two zips of one package differ (%v)", err)
	}
	want := []string{
		"alias.tf -rw-r--r-- # main\n",
		"empty/ drwxr-xr-x ",
		"main.tf -rw-r--r-- # main\n",
		"modules/ drwxr-xr-x ",
		"modules/a-b/ drwxr-xr-x ",
		"modules/a-b/b.tf -rw-r--r-- # b\n",
		"modules/a/ drwxr-xr-x ",
		"modules/a/a.tf -rw-r--r-- # a\n",
		"modules/a/up.tf -rw-r--r-- # main\n",
		"run.sh -rwxr-xr-x #!/bin/sh\n",
		"shared/ drwxr-xr-x ",
		"shared/a.tf -rw-r--r-- # a\n",
		"shared/up.tf -rw-r--r-- # main\n",
	}
	got := zipListing(t, z1.Bytes())
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the zip holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if res.Files != 8 {
		t.Errorf("Files = %d, want 8", res.Files)
	}
}

// Packages a zip without links cannot hold, or that would grow past the
// limits once their links are copied, are refused.
func TestWriteZipRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		files  map[string]string
		limits Limits
		want   func(error) bool
	}{
		{"link to the top", map[string]string{"main.tf": "x", "sub/self": "-> .."},
			Limits{}, func(err error) bool { return errors.Is(err, ErrLinkLoop) }},
		{"link to its own directory", map[string]string{"a/x.tf": "x", "a/here": "-> ."},
			Limits{}, func(err error) bool { return errors.Is(err, ErrLinkLoop) }},
		{"two directories linking each other", map[string]string{"a/x.tf": "x", "b/y.tf": "y", "a/tob": "-> ../b", "b/toa": "-> ../a"},
			Limits{}, func(err error) bool { return errors.Is(err, ErrLinkLoop) }},
		{"copies past the entry limit", map[string]string{"a/1": "1", "a/2": "2", "a/3": "3", "b": "-> a", "c": "-> a"},
			Limits{MaxEntries: 10}, func(err error) bool { return errors.As(err, new(*LimitError)) }},
		{"copies past the bytes limit", map[string]string{"a/big": strings.Repeat("x", 600), "b": "-> a"},
			Limits{MaxTreeBytes: 1000}, func(err error) bool { return errors.As(err, new(*LimitError)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pkg := packTree(t, tc.files)
			var out bytes.Buffer
			_, err := WriteZip(context.Background(), bytes.NewReader(pkg), &out, t.TempDir(), tc.limits)
			if !tc.want(err) {
				t.Errorf("WriteZip: %v", err)
			}
		})
	}
}

// A zip whose package is over the limits before any link is copied is
// refused by the unpacking, and nothing is left in the scratch
// directory.
func TestWriteZipLeavesNothing(t *testing.T) {
	pkg := packTree(t, map[string]string{"a": "1", "b": "2", "c": "3"})
	tmp := t.TempDir()
	var out bytes.Buffer
	if _, err := WriteZip(context.Background(), bytes.NewReader(pkg), &out, tmp, Limits{MaxEntries: 2}); !errors.As(err, new(*LimitError)) {
		t.Errorf("WriteZip: %v", err)
	}
	if _, err := WriteZip(context.Background(), bytes.NewReader(pkg), &out, tmp, Limits{}); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left in the scratch directory: %v", left)
	}
}
