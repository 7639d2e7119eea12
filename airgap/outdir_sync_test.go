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
	dir, err := openOutDir(out)
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
	write := func(path, data string) {
		t.Helper()
		if err := dir.mkdirAll(filepath.Dir(filepath.Join(out, path))); err != nil {
			t.Fatal(err)
		}
		if err := dir.write(filepath.Join(out, path), 0o644, func(w io.Writer) error {
			_, err := io.WriteString(w, data)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	write("a/x.zip", "archive x")
	write("a/y.zip", "archive y")
	write("b/z.json", "record z")
	for _, want := range []string{"file archive x", "file archive y", "file record z"} {
		if !slices.Contains(synced, want) {
			t.Errorf("synced %q, want %q among them (before the file took its name)", synced, want)
		}
	}
	synced = nil
	if err := dir.syncDirs(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"dir a", "dir b"}; !slices.Equal(synced, want) {
		t.Errorf("syncDirs synced %q, want %q: each directory written into, once", synced, want)
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
	first, err := openOutDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := openOutDir(out + "/./"); !errors.Is(err, ErrOutInUse) {
		t.Errorf("a second export into %s while the first writes: %v, want ErrOutInUse", out, err)
	}
	sealed := newEngine(t, nil)
	key := newKey(t, "exporter")
	if _, err := Export(context.Background(), sealed, servedBy(t, sealed, nil), Selection{}, out, key, func(string) {}); !errors.Is(err, ErrOutInUse) {
		t.Errorf("Export into %s while another writes it: %v, want ErrOutInUse", out, err)
	}
	side, names := ociLayoutParts(t, sealed)
	if _, err := ExportOCILayout(context.Background(), sealed, servedBy(t, sealed, side), names, Selection{}, out, func(string) {}); !errors.Is(err, ErrOutInUse) {
		t.Errorf("ExportOCILayout into %s while another writes it: %v, want ErrOutInUse", out, err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Export(context.Background(), sealed, servedBy(t, sealed, nil), Selection{}, out, key, func(string) {}); err != nil {
		t.Errorf("Export into %s once the first is done: %v", out, err)
	}
}
