package airgap

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIncrementalExportFailsAVersionItNoLongerVouchesFor: an export into
// the directory of an earlier one, whose cache no longer holds a version
// the earlier export carried, finds that version's archive changed since
// (a bad copy, bit rot on the medium: here its SHA256SUMS, whose
// signature no longer verifies). It cannot write it again nor sign
// it, and an import of the result refuses the version: the export must
// count it as failed (tfmirror export exits 1), not succeed with a line
// on standard error that CI does not read.
func TestIncrementalExportFailsAVersionItNoLongerVouchesFor(t *testing.T) {
	engine, p, out, key := exportedNetAndTarball(t)
	ctx := context.Background()
	if err := engine.Inventory().RemoveVersion("provider", p.String(), "1.0.0"); err != nil {
		t.Fatal(err)
	}
	sums := filepath.Join(out, p.Hostname.ForDisplay(), p.Namespace, p.Type, "terraform-provider-net_1.0.0_SHA256SUMS")
	data, err := os.ReadFile(sums)
	if err != nil {
		t.Fatal(err)
	}
	data[0] ^= 0x01
	if err := os.WriteFile(sums, data, 0o644); err != nil {
		t.Fatal(err)
	}

	var reports []string
	sum, err := Export(ctx, engine, servedBy(t, engine, nil), nil, Selection{}, out, key, func(s string) { reports = append(reports, s) })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("export: %+v %q", sum, reports)
	if sum.Failed == 0 {
		t.Errorf("the export counts no failure (exit status 0), though %s 1.0.0 is no longer vouched for: %q", p, reports)
	}
	if !strings.Contains(strings.Join(reports, "\n"), p.String()+" 1.0.0") {
		t.Errorf("no report names %s 1.0.0: %q", p, reports)
	}

	// What the export says must be what the import finds.
	isum, ireports := importInto(t, newEngine(t, nil), out, ImportOptions{Trust: Trust{ExportKeys: publicOf(t, key)}})
	t.Logf("import: %+v %q", isum, ireports)
	if isum.Failed == 0 {
		t.Fatalf("the import took the changed archive: %+v", isum)
	}
}
