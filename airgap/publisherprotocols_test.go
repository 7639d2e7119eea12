package airgap

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
)

// On the publisher-key path (a bundle without the exporting mirror's
// manifest, which anyone can carry), the publisher's signature covers
// the SHA256SUMS only: the "protocols" of the evidence file, which
// nothing signs, are not taken, neither into the version list nor into
// the package's metadata; the version is listed without them and its
// package served all the same. The exporting mirror's manifest, which
// covers the evidence file, vouches for them: a later import of the
// bundle under it lists the version with the protocols the origin gave.
func TestPublisherKeyImportTakesNoProtocols(t *testing.T) {
	o := enginetest.StartOrigin(t, fakeorigin.Options{})
	o.AddProvider("acme", "net", []string{"1.0.0"}, []string{"linux_amd64"})
	src := newEngine(t, o)
	ctx := context.Background()
	p := netProvider
	cacheArchive(t, src, p, "1.0.0", "linux_amd64")
	v, _ := addrs.ParseSemver("1.0.0")
	linux := addrs.Platform{OS: "linux", Arch: "amd64"}
	exporter := newKey(t, "exporter")
	export := func() string { return exportAll(t, src, exporter) }
	// A stranger drops the manifest (vouching only by the publisher's
	// key now) and rewrites the protocols the evidence gives.
	out := export()
	editEvidenceWithoutManifest(t, out, p, func(ef map[string]any) {
		for _, pkg := range ef["packages"].(map[string]any) {
			pkg.(map[string]any)["protocols"] = []string{"99.0"}
		}
	})
	dst := importByPublisherKey(t, o, out, p)
	protocols := func() []string {
		t.Helper()
		list, _, err := dst.Versions(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range list.Versions {
			if e.Version == "1.0.0" {
				return e.Protocols
			}
		}
		t.Fatalf("1.0.0 is not listed: %+v", list.Versions)
		return nil
	}
	if got := protocols(); len(got) != 0 {
		t.Errorf("the version list serves protocols %v, which no signature covers", got)
	}
	ev, err := dst.Evidence(ctx, p, v, []addrs.Platform{linux})
	if err != nil {
		t.Fatal(err)
	}
	for _, pe := range ev.Platforms {
		if len(pe.Protocols) != 0 {
			t.Errorf("the package metadata of %s serves protocols %v, which no signature covers", pe.Platform, pe.Protocols)
		}
	}
	if a, err := dst.OpenArchive(ctx, p, v, linux); err != nil {
		t.Errorf("the imported package is not served: %v", err)
	} else {
		a.Close()
	}

	// The exporting mirror's manifest vouches for the protocols.
	sum, reports := importInto(t, dst, export(), ImportOptions{Trust: Trust{ExportKeys: publicOf(t, exporter)}})
	if sum.Present != 1 {
		t.Fatalf("import under the manifest: %+v %q", sum, reports)
	}
	if got := protocols(); !slices.Equal(got, []string{"5.0"}) {
		t.Errorf("imported under the exporting mirror's manifest, the version list serves protocols %v, want the origin's [5.0]", got)
	}
}

// editEvidenceWithoutManifest does to the bundle out what a stranger who
// carries it can: drops the exporting mirror's manifest (the bundle is
// then vouched for by the publisher's key alone) and edits the evidence
// file of p's version 1.0.0 (its JSON, as edit changes it).
func editEvidenceWithoutManifest(t *testing.T, out string, p addrs.Provider, edit func(ef map[string]any)) {
	t.Helper()
	os.Remove(filepath.Join(out, manifestName))
	os.Remove(filepath.Join(out, manifestSigName))
	evPath := filepath.Join(out, p.Hostname.ForDisplay(), p.Namespace, p.Type, evidenceName(p.Type, "1.0.0"))
	raw, err := os.ReadFile(evPath)
	if err != nil {
		t.Fatal(err)
	}
	var ef map[string]any
	if err := json.Unmarshal(raw, &ef); err != nil {
		t.Fatal(err)
	}
	edit(ef)
	if raw, err = json.Marshal(ef); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(evPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// importByPublisherKey imports the bundle out into a new sealed mirror
// with the origin o's key pinned for p's namespace, and wants the
// version imported.
func importByPublisherKey(t *testing.T, o *fakeorigin.Origin, out string, p addrs.Provider) *mirror.Engine {
	t.Helper()
	pub, err := ReadPublicKeys(strings.NewReader(o.ArmoredPublicKey()))
	if err != nil {
		t.Fatal(err)
	}
	dst := newEngine(t, nil) // sealed
	ns := Namespace{Host: p.Hostname, Name: p.Namespace}
	sum, reports := importInto(t, dst, out, ImportOptions{Trust: Trust{PublisherKeys: map[Namespace]openpgp.EntityList{ns: pub}}})
	if sum.Imported != 1 {
		t.Fatalf("import: %+v %q", sum, reports)
	}
	return dst
}
