package airgap

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
)

// A provider of an IDN origin (with a port, too) goes through an export
// and an import as any other: the bundle names its host in Unicode, as
// a filesystem mirror does, and the sealed mirror serves it under its
// normal form.
func TestExportImportIDNProvider(t *testing.T) {
	for _, host := range []string{"bücher.example", "bücher.example:8443"} {
		t.Run(host, func(t *testing.T) {
			in := t.TempDir()
			pdir := filepath.Join(in, host, "acme", "thing")
			if err := os.MkdirAll(pdir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(pdir, "terraform-provider-thing_1.0.0_linux_amd64.zip"), enginetest.ZipOfSize(t, "thing", 1<<10, 1), 0o644); err != nil {
				t.Fatal(err)
			}
			src := newEngine(t, nil)
			if sum, reports := importInto(t, src, in, ImportOptions{AllowUnsigned: true}); sum.Failed != 0 || len(reports) != 0 {
				t.Fatalf("unsigned import: %+v, %q", sum, reports)
			}
			p, err := addrs.ParseProvider(host + "/acme/thing")
			if err != nil {
				t.Fatal(err)
			}
			out, key := filepath.Join(t.TempDir(), "out"), newKey(t, "exporter")
			var reports []string
			sum, err := Export(context.Background(), src, servedBy(t, src, nil), nil, Selection{}, out, key, func(s string) { reports = append(reports, s) })
			if err != nil || sum.Failed != 0 || sum.Written != 1 || len(reports) != 0 {
				t.Fatalf("export: %+v, %v, %q", sum, err, reports)
			}
			if _, err := os.Stat(filepath.Join(out, host, "acme", "thing")); err != nil {
				t.Errorf("the export does not name the host in Unicode: %v", err)
			}
			sealed := newEngine(t, nil)
			if sum, reports := importInto(t, sealed, out, ImportOptions{Trust: Trust{ExportKeys: publicOf(t, key)}}); sum.Failed != 0 || len(reports) != 0 {
				t.Fatalf("import of the export: %+v, %q", sum, reports)
			}
			list, _, err := sealed.Versions(context.Background(), p)
			if err != nil || len(list.Versions) != 1 || list.Versions[0].Version != "1.0.0" {
				t.Fatalf("the sealed mirror lists %+v, %v", list, err)
			}
		})
	}
}

// An archive an unsigned directory import leaves out because its name is
// not that of a package of the directory's provider (another provider's
// zip copied into the wrong directory) is counted as ignored and said,
// not passed over in silence: the run could otherwise end well, the
// package missing.
func TestImportSaysAMisnamedArchive(t *testing.T) {
	in := t.TempDir()
	pdir := filepath.Join(in, "registry.test", "acme", "thing")
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, typ := range map[string]string{"terraform-provider-thing_1.0.0_linux_amd64.zip": "thing", "terraform-provider-other_1.0.0_linux_amd64.zip": "other"} {
		if err := os.WriteFile(filepath.Join(pdir, name), enginetest.ZipOfSize(t, typ, 1<<10, 1), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sum, reports := importInto(t, newEngine(t, nil), in, ImportOptions{AllowUnsigned: true})
	if sum.Imported != 1 || sum.Failed != 0 {
		t.Fatalf("import: %+v, %q; want the one package of thing", sum, reports)
	}
	if sum.Ignored != 1 || len(reports) != 1 || !strings.Contains(reports[0], "terraform-provider-other_1.0.0_linux_amd64.zip") ||
		!strings.Contains(reports[0], "ignored") {
		t.Errorf("the misnamed archive: %d ignored, reports %q; want it counted and said", sum.Ignored, reports)
	}
}

// A host ending in a dot, which no front door serves, is refused at
// import, as the doors refuse it: an import had taken
// "tf.corp.example./acme/thing", listed on the status page and never
// served.
func TestImportRefusesAHostEndingInADot(t *testing.T) {
	in := t.TempDir()
	pdir := filepath.Join(in, "tf.corp.example.", "acme", "thing")
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pdir, "terraform-provider-thing_1.0.0_linux_amd64.zip"), enginetest.ZipOfSize(t, "thing", 1<<10, 1), 0o644); err != nil {
		t.Fatal(err)
	}
	var reports []string
	sum, err := Import(context.Background(), newEngine(t, nil), in, ImportOptions{AllowUnsigned: true, ScratchDir: t.TempDir()}, func(s string) { reports = append(reports, s) })
	if sum.Imported != 0 || !strings.Contains(fmt.Sprint(err, reports), `invalid host "tf.corp.example.": ends in a dot`) {
		t.Errorf("import: %+v, %v, %q; want the host refused", sum, err, reports)
	}
}
