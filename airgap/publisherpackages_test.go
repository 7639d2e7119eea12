package airgap

import (
	"context"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// On the publisher-key path, the publisher's signature covers the
// SHA256SUMS only. OpenTofu's "packages" of an evidence file carry h1:
// hashes of every platform's archive, which no signature covers; those of
// platforms whose archive the importing mirror has not cached cannot be
// checked, and OpenTofu writes every one of them into the lock file. So
// a stranger who carries the bundle (without the exporting mirror's
// manifest) must not get an h1: of their choosing served: on that path,
// an h1: the mirror cannot check against a cached archive is not taken,
// as the protocols are not.
func TestPublisherKeyImportTakesNoUncheckedH1(t *testing.T) {
	o := enginetest.StartOrigin(t, fakeorigin.Options{PackageHashes: true})
	o.AddProvider("acme", "net", []string{"1.0.0"}, []string{"linux_amd64", "darwin_arm64"})
	src := newEngine(t, o)
	ctx := context.Background()
	p := netProvider
	cacheArchive(t, src, p, "1.0.0", "linux_amd64")
	v, _ := addrs.ParseSemver("1.0.0")
	linux := addrs.Platform{OS: "linux", Arch: "amd64"}
	out := exportAll(t, src, newKey(t, "exporter"))
	// A stranger drops the manifest and puts an h1: of their own for
	// darwin_arm64 (whose archive is not in the bundle) into the
	// "packages" of linux_amd64's evidence.
	const forged = "h1:Zm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZ2VkZm9yZ2VkZm8="
	edited := false
	editEvidenceWithoutManifest(t, out, p, func(ef map[string]any) {
		for _, pkg := range ef["packages"].(map[string]any) {
			hashes, _ := pkg.(map[string]any)["packages"].(map[string]any)
			if d, ok := hashes["darwin_arm64"].(map[string]any); ok {
				var hs []any
				for _, h := range d["hashes"].([]any) {
					if !strings.HasPrefix(h.(string), "h1:") {
						hs = append(hs, h)
					}
				}
				d["hashes"] = append(hs, forged)
				edited = true
			}
		}
	})
	if !edited {
		t.Fatal("the evidence file has no packages entry for darwin_arm64")
	}
	dst := importByPublisherKey(t, o, out, p)
	ev, err := dst.Evidence(ctx, p, v, []addrs.Platform{linux})
	if err != nil {
		t.Fatal(err)
	}
	for _, pe := range ev.Platforms {
		for pl, h := range pe.Packages {
			for _, hash := range h.Hashes {
				if hash == forged {
					t.Errorf("the package metadata of %s serves %s for %s, which no signature covers and the mirror could not check", pe.Platform, hash, pl)
				}
			}
		}
	}
}
