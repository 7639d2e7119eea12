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

// TestImportRefusesListedVersionsMissing: a provider version and a
// module version whose files the signed manifest lists, taken out of the
// bundle (by whoever carried it, or lost in a copy cut short), are each
// refused and counted as failed, naming a file of it the bundle lacks, as
// a CLI version is; the version left whole is imported. Before, the
// import left them out in silence and said nothing failed.
func TestImportRefusesListedVersionsMissing(t *testing.T) {
	o := enginetest.StartOrigin(t, fakeorigin.Options{})
	o.AddProvider("acme", "net", []string{"1.0.0", "1.1.0"}, []string{"linux_amd64"})
	o.AddTarball("tarball-0.1.0.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# tarball\n")}))
	o.AddModule("acme", "tarball", "aws", "0.1.0", o.TarballURL("tarball-0.1.0.tar.gz"))
	engine := newEngine(t, o)
	cacheArchive(t, engine, netProvider, "1.0.0", "linux_amd64")
	cacheArchive(t, engine, netProvider, "1.1.0", "linux_amd64")
	moduleBytes(t, engine, tarballModule, "0.1.0")
	out, key := filepath.Join(t.TempDir(), "out"), newKey(t, "exporter")
	if sum, err := Export(context.Background(), engine, servedBy(t, engine, nil), nil, Selection{}, out, key, func(string) {}); err != nil || sum.Written != 2 || sum.Modules != 1 {
		t.Fatalf("export: %+v %v", sum, err)
	}
	// Of 1.1.0, its archive alone is taken out; the module goes whole.
	providerDir := filepath.Join(out, netProvider.Hostname.ForDisplay(), netProvider.Namespace, netProvider.Type)
	if err := os.Remove(filepath.Join(providerDir, "terraform-provider-net_1.1.0_linux_amd64.zip")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(out, modulesDir)); err != nil {
		t.Fatal(err)
	}

	sealed := newEngine(t, nil)
	sum, reports := importInto(t, sealed, out, ImportOptions{Trust: Trust{ExportKeys: publicOf(t, key)}, Shown: "IN"})
	if sum.Imported != 1 || sum.Failed != 2 || sum.Modules != 0 || !slices.Equal(sum.Versions, []string{netProvider.String() + " 1.0.0"}) {
		t.Errorf("import of a bundle lacking a listed version of each: %+v, %q; want 1.0.0 imported and 2 failed", sum, reports)
	}
	for _, want := range []string{
		netProvider.String() + " 1.1.0 refused: IN/registry.terraform.io/acme/net/terraform-provider-net_1.1.0_linux_amd64.zip is listed in the manifest IN/tfmirror-manifest.json",
		"module " + tarballModule.String() + " 0.1.0 refused: IN/" + tarballRel + ".json is listed in the manifest IN/tfmirror-manifest.json",
	} {
		if !slices.ContainsFunc(reports, func(r string) bool { return strings.HasPrefix(r, want) && strings.HasSuffix(r, "but missing") }) {
			t.Errorf("reports %q lack %q ... but missing", reports, want)
		}
	}
}
