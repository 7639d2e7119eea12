package proxy

import (
	"bytes"
	"net/http"
	"slices"
	"testing"

	"github.com/tfmirror/tfmirror/v2/verify"
)

// A version the origin spells otherwise ("1.0" beside "1.0.0", each with
// some of the platforms) is offered under the canonical spelling only:
// VERSION.json lists every platform with the zh: hash of the spelling its
// package comes from, and the archive URLs it gives, which name the
// canonical version and not the origin's file names, serve those bytes.
// Which spelling the engine asks is mirror's TestVersionSpellings.
func TestVersionSpellingsOverHTTP(t *testing.T) {
	t.Parallel()
	const version = "1.0.0"
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0"}, []string{"linux_amd64", "windows_amd64"})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"darwin_arm64", "linux_amd64"})
	want := map[string]string{"darwin_arm64": "1.0.0", "linux_amd64": "1.0.0", "windows_amd64": "1.0"}

	r := h.get(providerPath(version + ".json"))
	if r.status != http.StatusOK {
		t.Fatalf("VERSION.json: status %d: %s", r.status, r.body)
	}
	var doc versionDocument
	r.json(t, &doc)
	if len(doc.Archives) != len(want) {
		t.Errorf("VERSION.json lists %d platforms, want %d: %s", len(doc.Archives), len(want), r.body)
	}
	for pl, spelling := range want {
		a, ok := doc.Archives[pl]
		if !ok {
			t.Errorf("VERSION.json lacks %s", pl)
			continue
		}
		if zh := verify.ZH(h.origin.SHA256(ns, typ, spelling, pl)); !slices.Contains(a.Hashes, zh) {
			t.Errorf("%s: hashes %v, want %s (of the origin's %s)", pl, a.Hashes, zh, spelling)
		}
		if providerPath(a.URL) != archivePath(version, pl) {
			t.Errorf("%s: URL %q, want the archive name of version %s", pl, a.URL, version)
		}
		ar := h.get(providerPath(a.URL))
		if ar.status != http.StatusOK || ar.err != nil || !bytes.Equal(ar.body, h.origin.Archive(ns, typ, spelling, pl)) {
			t.Errorf("%s archive: status %d err %v, %d bytes (want the origin's %s)", pl, ar.status, ar.err, len(ar.body), spelling)
		}
		h.waitIdle()
	}
}
