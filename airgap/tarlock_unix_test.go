//go:build !windows && !plan9 && !js && !wasip1 && !aix

package airgap

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// An export into a tar file killed while it wrote leaves its working
// directory and its unfinished tar file beside the tar file's name,
// written a moment ago. An export retried at once removes them, and says
// so: no export holds their lock (a live export holds its working
// directory's until it ends, and a killed one's went with its process).
// Those of an export still writing, whose lock is held, stay, however
// old.
func TestTarExportRetryRemovesAKilledExportsLeftoversAtOnce(t *testing.T) {
	engine, _ := cachedNetAndTarball(t)
	parent := t.TempDir()
	file := func(path string) string {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("half an archive"), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	killed := filepath.Join(parent, ".tfmirror-export-ABCDEFGHIJKLMNOPQRSTUVWXYZ")
	file(filepath.Join(killed, "registry.terraform.io", "hashicorp", "null", "archive.zip"))
	stale := []string{killed, file(killed + ".tar")}

	live := filepath.Join(parent, ".tfmirror-export-QRSTUVWXYZ234567ABCDEFGHIJ")
	file(filepath.Join(live, "index.json"))
	holdOut(t, live) // an export still writing
	kept := []string{live, file(live + ".tar")}

	var reports []string
	out := filepath.Join(parent, "bundle.tar")
	if sum, err := Export(context.Background(), engine, servedBy(t, engine, nil), nil, Selection{}, out, newKey(t, "exporter"), func(s string) { reports = append(reports, s) }); err != nil || sum.Failed != 0 {
		t.Fatalf("export retried after a killed one: %+v %v %q", sum, err, reports)
	}
	checkRemoved(t, stale, reports)
	for _, path := range kept {
		if _, err := os.Lstat(path); err != nil {
			t.Errorf("%s, of an export still writing, was removed: %v", path, err)
		}
	}
}
