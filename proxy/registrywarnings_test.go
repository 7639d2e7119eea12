package proxy

import (
	"net/http"
	"slices"
	"testing"

	"github.com/tfmirror/tfmirror/v2/discovery/registryjson"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// The origin's own warnings in its versions answer (a deprecation
// notice: "warnings":["..."]), which Terraform prints as "Additional
// provider information from registry" on a direct install, reach the
// client through the registry protocol too: a host block pointing at
// the mirror must not silence them.
func TestRegistryPassesTheOriginsWarnings(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
	const notice = "This provider is deprecated: use example/other instead."
	h.origin.SetKindBody(fakeorigin.Versions, []byte(`{"versions":[{"version":"1.0.0","protocols":["5.0"],`+
		`"platforms":[{"os":"linux","arch":"amd64"}]}],"warnings":["`+notice+`"]}`), "application/json")

	r := h.get(registryPath("versions"))
	if r.status != http.StatusOK {
		t.Fatalf("versions: status %d: %s", r.status, r.body)
	}
	var doc registryjson.Versions
	r.json(t, &doc)
	if len(doc.Versions) != 1 {
		t.Fatalf("versions answer %s: want version 1.0.0", r.body)
	}
	if !slices.Contains(doc.Warnings, notice) {
		t.Errorf("versions answer's warnings %q: want the origin's %q, which Terraform prints on a direct install", doc.Warnings, notice)
	}
}
