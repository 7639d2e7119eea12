package admin

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/airgap"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestBundleExportImportCountModulePackages: a bundle export and an
// import through a running mirror count the module packages they carry
// in tfmirror_export_packages_total, tfmirror_import_packages_total and
// their byte counters, as an OCI layout export counts module zips and as
// their summaries count them ("modules: 1 packages exported"); a module
// version that fails is counted as failed there already, so one that
// succeeds must be counted too.
func TestBundleExportImportCountModulePackages(t *testing.T) {
	from := newHarness(t, harnessOptions{})
	o := from.origin
	o.AddTarball("m.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# m\n")}))
	o.AddModule("acme", "vpc", "aws", "1.0.0", o.TarballURL("m.tar.gz"))
	to := newHarness(t, harnessOptions{})
	key, trusted := exportKeyPair(t)
	src := from.newAPI(t, nil, nil, Options{ExportKey: func() (*airgap.ExportKey, error) { return key, nil }})
	m, err := addrs.ParseModule("registry.terraform.io/acme/vpc/aws")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.UnpackModule(context.Background(), m, "1.0.0", t.TempDir()); err != nil {
		t.Fatal(err)
	}
	met := &countingSync{outcomes: map[string]int{}}
	src.metrics = met

	out := filepath.Join(t.TempDir(), "export")
	exp, err := src.Export(context.Background(), ExportRequest{Out: out})
	if err != nil || exp.Modules != 1 || exp.Failed != 0 {
		t.Fatalf("export: %+v, %v; want 1 module package", exp, err)
	}
	dst := to.newAPI(t, nil, met, Options{ScratchDir: t.TempDir(), Trust: airgap.Trust{ExportKeys: trusted}})
	imp, err := dst.Import(context.Background(), ImportRequest{In: out})
	if err != nil || imp.Modules != 1 || imp.Failed != 0 {
		t.Fatalf("import: %+v, %v; want 1 module package", imp, err)
	}
	want := map[string]int{"export exported": 1, "export bytes": int(exp.ModuleBytes),
		"import imported": 1, "import bytes": int(imp.ModuleBytes)}
	for k, v := range want {
		if met.outcomes[k] != v {
			t.Errorf("metrics %q = %d, want %d (all: %v)", k, met.outcomes[k], v, met.outcomes)
		}
	}
}
