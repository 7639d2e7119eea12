package airgap

import (
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
