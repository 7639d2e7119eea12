package airgap

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestImportOfAnExportWithoutManifestNamesAnInterruptedExport: an export
// into a directory killed before it signed its manifest (written last)
// leaves what looks like a whole export, packages, evidence and indexes,
// without it. Its import refuses each version, saying that such a
// directory may be an interrupted export and to export again, not only
// that it is of tfmirror 1.x or a plain directory.
func TestImportOfAnExportWithoutManifestNamesAnInterruptedExport(t *testing.T) {
	o := enginetest.StartOrigin(t, fakeorigin.Options{})
	o.AddProvider("acme", "net", []string{"1.0.0"}, []string{"linux_amd64"})
	engine := newEngine(t, o)
	cacheArchive(t, engine, netProvider, "1.0.0", "linux_amd64")
	out, key := filepath.Join(t.TempDir(), "out"), newKey(t, "exporter")
	if sum, err := Export(context.Background(), engine, servedBy(t, engine, nil), nil, Selection{}, out, key, func(string) {}); err != nil || sum.Written != 1 {
		t.Fatalf("export: %+v %v", sum, err)
	}
	for _, name := range []string{manifestName, manifestSigName} {
		if err := os.Remove(filepath.Join(out, name)); err != nil {
			t.Fatal(err)
		}
	}

	sum, reports := importInto(t, newEngine(t, nil), out, ImportOptions{Trust: Trust{ExportKeys: publicOf(t, key)}, Shown: "IN"})
	if sum.Imported != 0 || sum.Failed != 1 {
		t.Errorf("import of an export without its manifest: %+v, %q; want its version refused", sum, reports)
	}
	want := "an export into a directory interrupted before it signed its manifest (export again)"
	if !slices.ContainsFunc(reports, func(r string) bool { return strings.Contains(r, want) }) {
		t.Errorf("reports %q do not say %q", reports, want)
	}
}
