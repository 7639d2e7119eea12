package admin

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/tfmirror/tfmirror/v2/mirror/served"
	"github.com/tfmirror/tfmirror/v2/oci"
)

// TestOCILayoutExportCountsPackages: an OCI layout export counts in
// tfmirror_export_packages_total and tfmirror_export_bytes_total what a
// bundle export counts there, the packages (a version for a platform)
// and their archives' bytes, not every blob of the layout (each
// package's manifest, the empty config, the version's index).
func TestOCILayoutExportCountsPackages(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	met := &countingSync{outcomes: map[string]int{}}
	side, err := h.engine.NewOCI()
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := served.New(served.Parts{Providers: h.engine, Modules: h.engine.Modules(), Zips: h.engine.Modules().Zips(),
		OCI: side, Stored: h.engine.Inventory()})
	if err != nil {
		t.Fatal(err)
	}
	names, err := oci.NewNames("providers", "modules")
	if err != nil {
		t.Fatal(err)
	}
	a := h.newAPI(t, nil, nil, Options{OCILayout: &OCILayout{Artifacts: pkgs, Names: names}})
	h.cacheWidget(t, a, "1.0.0")
	a.metrics = met // what the export counts, not what caching the package did
	archive := len(h.origin.Archive("acme", "widget", "1.0.0", "linux_amd64"))

	out := filepath.Join(t.TempDir(), "layout")
	for i, want := range []map[string]int{
		{"export exported": 1, "export present": 0, "export failed": 0, "export bytes": archive},
		{"export exported": 1, "export present": 1, "export failed": 0, "export bytes": archive},
	} {
		res, err := a.Export(context.Background(), ExportRequest{Out: out, Format: FormatOCILayout})
		if err != nil || res.Failed != 0 {
			t.Fatalf("export %d: %+v, %v", i+1, res, err)
		}
		for k, n := range want {
			if met.outcomes[k] != n {
				t.Errorf("after export %d (%+v): %s = %d, want %d", i+1, res.Layout, k, met.outcomes[k], n)
			}
		}
	}
}
