package airgap

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// An export's files are synced before they take their names, and the
// directories they were written into are synced by syncDirs (which an
// export calls before it writes its signed manifest or push.sh, and
// after): a medium pulled out once the export says it is done holds
// every file the manifest names, whole.
func TestOutDirSyncsFilesAndTheirDirectories(t *testing.T) {
	out := t.TempDir()
	dir, err := openOutDir(out, false)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	var synced []string
	dir.sync = func(f *os.File) error {
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if fi.IsDir() {
			synced = append(synced, "dir "+filepath.Base(f.Name()))
		} else {
			data, _ := os.ReadFile(f.Name())
			synced = append(synced, "file "+string(data))
		}
		return nil
	}
	writeOut(t, dir, "a/x.zip", "archive x")
	writeOut(t, dir, "a/y.zip", "archive y")
	writeOut(t, dir, "b/z.json", "record z")
	for _, want := range []string{"file archive x", "file archive y", "file record z"} {
		if !slices.Contains(synced, want) {
			t.Errorf("synced %q, want %q among them (before the file took its name)", synced, want)
		}
	}
	synced = nil
	if err := dir.syncDirs(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"dir .", "dir a", "dir b"}; !slices.Equal(synced, want) {
		t.Errorf("syncDirs synced %q, want %q: each directory written into or made in, once", synced, want)
	}
	synced = nil
	if err := dir.syncDirs(); err != nil || len(synced) != 0 {
		t.Errorf("syncDirs with nothing written since: synced %q, %v", synced, err)
	}
}

// Two exports into one directory at once (two `tfmirror export` through
// one serve) would each write index.json and the manifest from what it
// read before the other wrote: the second is refused while the first
// writes, whatever the spelling of the path, and the directory is free
// again once the first is done.
func TestOneExportAtATimeIntoADirectory(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	first, err := openOutDir(out, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := openOutDir(out+"/./", false); !errors.Is(err, ErrOutInUse) {
		t.Errorf("a second export into %s while the first writes: %v, want ErrOutInUse", out, err)
	}
	sealed := newEngine(t, nil)
	key := newKey(t, "exporter")
	if _, err := Export(context.Background(), sealed, servedBy(t, sealed, nil), nil, Selection{}, out, key, func(string) {}); !errors.Is(err, ErrOutInUse) {
		t.Errorf("Export into %s while another writes it: %v, want ErrOutInUse", out, err)
	}
	side, names := ociLayoutParts(t, sealed)
	if _, err := ExportOCILayout(context.Background(), sealed, servedBy(t, sealed, side), names, Selection{}, out, func(string) {}); !errors.Is(err, ErrOutInUse) {
		t.Errorf("ExportOCILayout into %s while another writes it: %v, want ErrOutInUse", out, err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Export(context.Background(), sealed, servedBy(t, sealed, nil), nil, Selection{}, out, key, func(string) {}); err != nil {
		t.Errorf("Export into %s once the first is done: %v", out, err)
	}
}

// A directory an export makes is a new name in the directory above it:
// syncDirs syncs that one too (up to OUT), or a medium pulled out could
// lose the new directory, and with it every file the manifest names in
// it, however well those were synced. A directory that was there
// already is no new name: the one above it is not synced for it.
func TestOutDirSyncsTheParentsOfTheDirectoriesItMakes(t *testing.T) {
	out := t.TempDir()
	if err := os.Mkdir(filepath.Join(out, "old"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := openOutDir(out, false)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	var synced []string
	dir.sync = func(f *os.File) error {
		if fi, err := f.Stat(); err == nil && fi.IsDir() {
			rel, err := filepath.Rel(out, f.Name())
			if err != nil {
				return err
			}
			synced = append(synced, rel)
		}
		return nil
	}
	writeOut(t, dir, "modules/host/ns/name/1.0.0.json", "data")
	writeOut(t, dir, "old/x.json", "data")
	if err := dir.syncDirs(); err != nil {
		t.Fatal(err)
	}
	want := []string{".", "modules", "modules/host", "modules/host/ns", "modules/host/ns/name", "old"}
	for i := range want {
		want[i] = filepath.FromSlash(want[i])
	}
	if !slices.Equal(synced, want) {
		t.Errorf("syncDirs synced %q, want %q: each directory written into, and the one above each directory made", synced, want)
	}
}

// A second export into the directory another export writes is refused
// under any name of it, a link to it among them.
func TestOneExportAtATimeIntoADirectoryThroughALink(t *testing.T) {
	base := t.TempDir()
	out := filepath.Join(base, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	alias := filepath.Join(base, "alias")
	if err := os.Symlink("out", alias); err != nil {
		t.Fatal(err)
	}
	first, err := openOutDir(out, false)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if second, err := openOutDir(alias, false); !errors.Is(err, ErrOutInUse) {
		if err == nil {
			second.Close()
		}
		t.Errorf("a second export into %s (a link to %s) while the first writes: %v, want ErrOutInUse", alias, out, err)
	}
}

// OUT made by the export (and the directories above it it made) is a
// new name in the directory above it: syncDirs syncs that one too, or a
// medium pulled out could lose the whole export.
func TestOutDirSyncsTheDirectoryAboveANewOUT(t *testing.T) {
	base := t.TempDir()
	out := filepath.Join(base, "new", "out")
	dir, err := openOutDir(out, false)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	var synced []string
	dir.sync = func(f *os.File) error {
		if fi, err := f.Stat(); err == nil && fi.IsDir() {
			synced = append(synced, f.Name())
		}
		return nil
	}
	writeOut(t, dir, "x.json", "data")
	if err := dir.syncDirs(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{base, filepath.Join(base, "new")} {
		if !slices.Contains(synced, want) {
			t.Errorf("syncDirs synced %q, want %s among them: it holds a directory the export made", synced, want)
		}
	}
	synced = nil
	if err := dir.syncDirs(); err != nil || len(synced) != 0 {
		t.Errorf("syncDirs with nothing written since: synced %q, %v", synced, err)
	}
}

// writeOut writes data to path (slash-separated, under OUT) as an export
// writes a file: its directories made first (outDir.mkdirAll), then the
// file through outDir.write.
func writeOut(t *testing.T, dir *outDir, path, data string) {
	t.Helper()
	name := filepath.Join(dir.path, filepath.FromSlash(path))
	if err := dir.mkdirAll(filepath.Dir(name)); err != nil {
		t.Fatal(err)
	}
	if err := dir.write(name, 0o644, func(w io.Writer) error {
		_, err := io.WriteString(w, data)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
