package proxy

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/discovery/registryjson"
)

// Every version index.json and the registry's versions answer list can be
// asked for: Terraform picks the
// newest version index.json offers that meets its constraint and asks for
// its VERSION.json, and a 400 there is fatal, where a direct install
// from the origin would have installed it.
func TestIndexListsOnlyVersionsTheMirrorServes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	long := "1.1.0+" + strings.Repeat("b", 140)
	h.origin.AddProvider(ns, typ, []string{"1.0.0", long}, []string{"linux_amd64"})

	r := h.get(providerPath("index.json"))
	if r.status != http.StatusOK {
		t.Fatalf("index.json: status %d: %s", r.status, r.body)
	}
	var idx indexDocument
	r.json(t, &idx)
	for v := range idx.Versions {
		vr := h.get(providerPath(v + ".json"))
		if vr.status != http.StatusOK {
			t.Errorf("index.json lists %.20q..., whose VERSION.json is status %d: %s", v, vr.status, vr.body)
		}
	}
	rr := h.get(registryPath("versions"))
	var regDoc registryjson.Versions
	rr.json(t, &regDoc)
	for _, rv := range regDoc.Versions {
		if rv.Version == long {
			t.Errorf("the registry's versions answer lists %.20q..., which no download request can name", rv.Version)
		}
	}
	h.waitIdle()
}
