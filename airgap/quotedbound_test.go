package airgap

import (
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestImportQuotesTheBundleBounded: what an evidence file says that no
// key vouches for (the provider it names, a package's file name, os,
// arch and shasum), however long, is quoted in the version's refusal cut
// short: a refusal is kept in memory until the import ends, then logged
// and answered whole, and each quoted the evidence file's megabytes, a
// bundle of a few MiB (gzip-compressed) holding the serve's gigabytes.
func TestImportQuotesTheBundleBounded(t *testing.T) {
	o := enginetest.StartOrigin(t, fakeorigin.Options{})
	o.AddProvider("acme", "net", []string{"1.0.0"}, []string{"linux_amd64"})
	src := newEngine(t, o)
	p := netProvider
	cacheArchive(t, src, p, "1.0.0", "linux_amd64")
	pub, err := ReadPublicKeys(strings.NewReader(o.ArmoredPublicKey()))
	if err != nil {
		t.Fatal(err)
	}
	trust := Trust{PublisherKeys: map[Namespace]openpgp.EntityList{{Host: p.Hostname, Name: p.Namespace}: pub}}
	long := strings.Repeat("x", 4<<20)
	for name, edit := range map[string]func(ef map[string]any){
		"provider": func(ef map[string]any) { ef["provider"] = long },
		"filename": func(ef map[string]any) { pkgOf(ef)["filename"] = long },
		"os":       func(ef map[string]any) { pkgOf(ef)["os"] = long },
		"arch":     func(ef map[string]any) { pkgOf(ef)["arch"] = long },
		"shasum":   func(ef map[string]any) { pkgOf(ef)["shasum"] = long },
	} {
		t.Run(name, func(t *testing.T) {
			out := exportAll(t, src, newKey(t, "exporter"))
			editEvidenceWithoutManifest(t, out, p, edit)
			sum, reports := importInto(t, newEngine(t, nil), out, ImportOptions{Trust: trust})
			if sum.Imported != 0 || sum.Failed != 1 || len(reports) != 1 {
				t.Fatalf("import: %+v, %d reports; want the version refused", sum, len(reports))
			}
			if n := len(reports[0]); n > maxReportBytes+64 {
				t.Errorf("the refusal is %d bytes long (%.200q...)", n, reports[0])
			}
		})
	}
}

// pkgOf is the package of linux_amd64 in the evidence file ef.
func pkgOf(ef map[string]any) map[string]any {
	return ef["packages"].(map[string]any)["linux_amd64"].(map[string]any)
}
