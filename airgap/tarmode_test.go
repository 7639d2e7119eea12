package airgap

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestTarExportMode: an export into a tar file is written with the mode
// a directory export's files have (0644), not the private mode of the
// temporary file it is written as: the bundle is carried across the gap
// and read there by another user (a pipeline's, the importing mirror's).
func TestTarExportMode(t *testing.T) {
	ctx := context.Background()
	empty := newEngine(t, enginetest.StartOrigin(t, fakeorigin.Options{}))
	key := newKey(t, "exporter")
	for _, name := range []string{"out.tar", "out.tar.gz"} {
		out := filepath.Join(t.TempDir(), name)
		if _, err := Export(ctx, empty, servedBy(t, empty, nil), nil, Selection{}, out, key, func(string) {}); err != nil {
			t.Fatalf("export to %s: %v", name, err)
		}
		info, err := os.Stat(out)
		if err != nil || info.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v (%v), want 0644 as a directory export's files", name, info.Mode(), err)
		}
	}
}
