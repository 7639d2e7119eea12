//go:build !windows && !plan9 && !js && !wasip1 && !aix

package airgap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// holdOut takes, as another process's export into the directory out
// would, its lock, until the test ends.
func holdOut(t *testing.T, out string) {
	t.Helper()
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
}

// freshTemp writes a temporary file of write's at path, written a moment
// ago, as an export killed while it wrote leaves it.
func freshTemp(t *testing.T, path string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte("half a file"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// An export into a directory killed while it wrote (`kill -9`, an OOM
// kill) leaves its temporary files, written a moment ago. An export
// retried at once removes them, and says so: it holds OUT's lock, so no
// other export writes into OUT, and those files are a killed one's.
func TestExportRetryRemovesAKilledExportsTemporaryFilesAtOnce(t *testing.T) {
	engine, p, out, key := exportedNetAndTarball(t)
	providerDir := filepath.Join(out, p.Hostname.ForDisplay(), p.Namespace, p.Type)
	stale := []string{
		freshTemp(t, filepath.Join(providerDir, ".tmp-ABCDEFGHIJKLMNOPQRSTUVWXYZ")),
		freshTemp(t, filepath.Join(out, ".tmp-234567ABCDEFGHIJKLMNOPQRST")),
	}
	var reports []string
	sum, err := Export(context.Background(), engine, servedBy(t, engine, nil), nil, Selection{}, out, key, func(s string) { reports = append(reports, s) })
	if err != nil || sum.Failed != 0 {
		t.Fatalf("export retried after a killed one: %+v %v %q", sum, err, reports)
	}
	checkRemoved(t, stale, reports)
	if sum.Unlisted != 0 {
		t.Errorf("%d files reported left out of the manifest, want none: %q", sum.Unlisted, reports)
	}
}

// The same for an OCI layout export.
func TestOCILayoutExportRetryRemovesAKilledExportsTemporaryFilesAtOnce(t *testing.T) {
	engine, _ := cachedNetAndTarball(t)
	ctx := context.Background()
	side, names := ociLayoutParts(t, engine)
	out := filepath.Join(t.TempDir(), "layout")
	if sum, err := ExportOCILayout(ctx, engine, servedBy(t, engine, side), names, Selection{}, out, func(string) {}); err != nil || sum.Tags != 2 {
		t.Fatalf("first export: %+v %v", sum, err)
	}
	stale := []string{freshTemp(t, filepath.Join(out, ".tmp-ABCDEFGHIJKLMNOPQRSTUVWXYZ"))}
	var reports []string
	if _, err := ExportOCILayout(ctx, engine, servedBy(t, engine, side), names, Selection{}, out, func(s string) { reports = append(reports, s) }); err != nil {
		t.Fatalf("export retried after a killed one: %v", err)
	}
	checkRemoved(t, stale, reports)
}

// An export into a directory another process's export is writing (its
// lock held) is refused at once, naming the directory, and neither
// writes into it nor removes the other's temporary files.
func TestExportRefusedWhileAnotherProcessWritesTheDirectory(t *testing.T) {
	engine, _ := cachedNetAndTarball(t)
	key := newKey(t, "exporter")
	side, names := ociLayoutParts(t, engine)
	exports := map[string]func(out string) error{
		"directory": func(out string) error {
			_, err := Export(context.Background(), engine, servedBy(t, engine, nil), nil, Selection{}, out, key, func(string) {})
			return err
		},
		"oci-layout": func(out string) error {
			_, err := ExportOCILayout(context.Background(), engine, servedBy(t, engine, side), names, Selection{}, out, func(string) {})
			return err
		},
	}
	for name, export := range exports {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			if err := os.Mkdir(out, 0o755); err != nil {
				t.Fatal(err)
			}
			live := freshTemp(t, filepath.Join(out, ".tmp-ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
			holdOut(t, out)
			err := export(out)
			if !errors.Is(err, ErrOutInUse) || !strings.Contains(fmt.Sprint(err), "another export is writing into "+out) {
				t.Fatalf("export into %s while another process's export writes it: %v, want ErrOutInUse naming it", out, err)
			}
			entries, err := os.ReadDir(out)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 || entries[0].Name() != filepath.Base(live) {
				t.Errorf("%s holds %v after the refused export, want only the other export's %s", out, entries, filepath.Base(live))
			}
		})
	}
}

// An export into a tar file in OUT (OUT/bundle.tar) writes its working
// directory beside it, with temporary files of its own: an export into
// OUT holding OUT's lock leaves them to that export, which holds its
// own lock, rather than take them for a killed export's.
func TestExportLeavesATarExportsWorkingDirectoryInOut(t *testing.T) {
	engine, _, out, key := exportedNetAndTarball(t)
	working := filepath.Join(out, tarTempPrefix+"ABCDEFGHIJKLMNOPQRSTUVWXYZ")
	if err := os.Mkdir(working, 0o700); err != nil {
		t.Fatal(err)
	}
	holdOut(t, working) // the tar export, live
	theirs := freshTemp(t, filepath.Join(working, ".tmp-234567ABCDEFGHIJKLMNOPQRST"))
	var reports []string
	if _, err := Export(context.Background(), engine, servedBy(t, engine, nil), nil, Selection{}, out, key, func(s string) { reports = append(reports, s) }); err != nil {
		t.Fatalf("export: %v %q", err, reports)
	}
	if _, err := os.Stat(theirs); err != nil {
		t.Errorf("%s, a live tar export's temporary file, was removed (%v): %q", theirs, err, reports)
	}
}
