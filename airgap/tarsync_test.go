package airgap

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// An export into a tar file syncs the directory it is in once the tar
// file took its name, before it says it is done: a medium pulled out at
// once (or a power loss) holds the bundle under its name, as a directory
// export's files are (outDir.syncDirs), not under its temporary name with
// nothing, or an earlier export's bundle, under its own. Not parallel: it
// replaces syncDir.
func TestTarExportSyncsItsName(t *testing.T) {
	engine, _ := cachedNetAndTarball(t)
	parent := t.TempDir()
	out := filepath.Join(parent, "bundle.tar.gz")
	var synced []string
	old := syncDir
	t.Cleanup(func() { syncDir = old })
	syncDir = func(dir string) error {
		if _, err := os.Lstat(out); err != nil {
			t.Errorf("%s synced before the tar file took its name: %v", dir, err)
		}
		synced = append(synced, dir)
		return old(dir)
	}
	if sum, err := Export(context.Background(), engine, servedBy(t, engine, nil), nil, Selection{}, out, newKey(t, "exporter"), func(string) {}); err != nil || sum.Failed != 0 {
		t.Fatalf("export: %+v %v", sum, err)
	}
	if len(synced) != 1 || synced[0] != parent {
		t.Errorf("directories synced once the tar file took its name: %q, want %s", synced, parent)
	}
}
