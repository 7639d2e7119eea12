package airgap

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
)

// TestInterruptedExportIsSaidSo: an export into a directory killed before
// it signed its manifest fails its import naming an interrupted export
// and saying to export again.
//
//   - Killed between its manifest and the manifest's signature, in a
//     directory an earlier export wrote: the earlier signature stayed
//     beside the new manifest, and the import refused every version
//     saying the manifest was changed after it was signed, as of a bundle
//     tampered with. The earlier signature is now removed first.
//   - Killed before its manifest (written last): what looks like a whole
//     export, packages, evidence and indexes, without it. The import said
//     only that it was of tfmirror 1.x or a plain directory.
func TestInterruptedExportIsSaidSo(t *testing.T) {
	for _, tc := range []struct {
		name string
		// interrupt exports engine's cache (1.0.0 and 1.1.0 of
		// netProvider) into out, interrupted.
		interrupt func(t *testing.T, engine *mirror.Engine, out string, key *ExportKey)
		want      string
	}{
		{"killed between the manifest and its signature, over an earlier export",
			func(t *testing.T, engine *mirror.Engine, out string, key *ExportKey) {
				killed := errors.New("killed")
				beforeSignature = func() error { return killed }
				t.Cleanup(func() { beforeSignature = func() error { return nil } })
				if _, err := Export(context.Background(), engine, servedBy(t, engine, nil), nil, Selection{}, out, key, func(string) {}); !errors.Is(err, killed) {
					t.Fatalf("the export stopped before its signature with %v", err)
				}
			},
			"has no signature " + manifestSigName + " beside it (an export into the directory interrupted before it signed its manifest: export again)"},
		{"killed before its manifest",
			func(t *testing.T, engine *mirror.Engine, out string, key *ExportKey) {
				if _, err := Export(context.Background(), engine, servedBy(t, engine, nil), nil, Selection{}, out, key, func(string) {}); err != nil {
					t.Fatal(err)
				}
				for _, name := range []string{manifestName, manifestSigName} {
					if err := os.Remove(filepath.Join(out, name)); err != nil {
						t.Fatal(err)
					}
				}
			},
			"an export into a directory interrupted before it signed its manifest (export again)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := enginetest.StartOrigin(t, fakeorigin.Options{})
			o.AddProvider("acme", "net", []string{"1.0.0", "1.1.0"}, []string{"linux_amd64"})
			engine := newEngine(t, o)
			out, key := filepath.Join(t.TempDir(), "out"), newKey(t, "exporter")
			// An earlier export of 1.0.0, into the same directory.
			cacheArchive(t, engine, netProvider, "1.0.0", "linux_amd64")
			if _, err := Export(context.Background(), engine, servedBy(t, engine, nil), nil, Selection{}, out, key, func(string) {}); err != nil {
				t.Fatal(err)
			}
			cacheArchive(t, engine, netProvider, "1.1.0", "linux_amd64")
			tc.interrupt(t, engine, out, key)

			sum, reports := importInto(t, newEngine(t, nil), out, ImportOptions{Trust: Trust{ExportKeys: publicOf(t, key)}, Shown: "IN"})
			if sum.Imported != 0 || sum.Failed != 2 {
				t.Errorf("import of an interrupted export: %+v, %q; want both versions refused", sum, reports)
			}
			for _, r := range reports {
				if strings.Contains(r, "changed after it was signed") {
					t.Errorf("the import took an interrupted export for a manifest changed after it was signed: %q", r)
				}
			}
			if !slices.ContainsFunc(reports, func(r string) bool { return strings.Contains(r, tc.want) }) {
				t.Errorf("reports %q do not say %q", reports, tc.want)
			}
		})
	}
}
