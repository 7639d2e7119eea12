package airgap

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestExportKilledBeforeItSignsLeavesNoStaleSignature: an export into a
// directory an earlier export wrote, killed between its new manifest and
// that manifest's signature, leaves the manifest without signature, and
// its import says to export again; before, the earlier signature stayed
// beside the new manifest, and the import refused every version saying
// the manifest was changed after it was signed, as of a bundle tampered
// with.
func TestExportKilledBeforeItSignsLeavesNoStaleSignature(t *testing.T) {
	o := enginetest.StartOrigin(t, fakeorigin.Options{})
	o.AddProvider("acme", "net", []string{"1.0.0", "1.1.0"}, []string{"linux_amd64"})
	engine := newEngine(t, o)
	cacheArchive(t, engine, netProvider, "1.0.0", "linux_amd64")
	out, key := filepath.Join(t.TempDir(), "out"), newKey(t, "exporter")
	if _, err := Export(context.Background(), engine, servedBy(t, engine, nil), nil, Selection{}, out, key, func(string) {}); err != nil {
		t.Fatal(err)
	}
	cacheArchive(t, engine, netProvider, "1.1.0", "linux_amd64")
	killed := errors.New("killed")
	beforeSignature = func() error { return killed }
	t.Cleanup(func() { beforeSignature = func() error { return nil } })
	if _, err := Export(context.Background(), engine, servedBy(t, engine, nil), nil, Selection{}, out, key, func(string) {}); !errors.Is(err, killed) {
		t.Fatalf("the export stopped before its signature with %v", err)
	}

	sum, reports := importInto(t, newEngine(t, nil), out, ImportOptions{Trust: Trust{ExportKeys: publicOf(t, key)}, Shown: "IN"})
	if sum.Imported != 0 || sum.Failed != 2 {
		t.Errorf("import of an export killed before it signed: %+v, %q; want both versions refused", sum, reports)
	}
	for _, r := range reports {
		if strings.Contains(r, "changed after it was signed") {
			t.Errorf("the import took the export killed before it signed for a manifest changed after it was signed: %q", r)
		}
	}
	want := "has no signature " + manifestSigName + " beside it (an export into the directory interrupted before it signed its manifest: export again)"
	if !slices.ContainsFunc(reports, func(r string) bool { return strings.Contains(r, want) }) {
		t.Errorf("reports %q do not say %q", reports, want)
	}
}
