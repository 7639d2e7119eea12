package main

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPublicURLReloadCertificateFailure: a reload that would put in
// force a public URL whose host the generated certificate does not name,
// when the certificate cannot be issued again (its CA's key damaged),
// puts nothing in force and says so: the reload fails (tfmirror reload
// exits non-zero), the status page's last reload is not applied and
// says why, and the public URL in force (the one the status page tells
// clients to use) is still the one the certificate served names.
// Otherwise the reload said success while clients were told of a host
// every TLS client refuses.
func TestPublicURLReloadCertificateFailure(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "tfmirror.hcl")
	write := func(publicURL string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte("public_url = \""+publicURL+"\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("https://mirror-a.example.test/")
	data := filepath.Join(dir, "data")
	args := []string{"--config", conf, "--data-dir", data}
	m, _ := reloadingServer(t, args)
	if err := os.WriteFile(filepath.Join(data, "tls", "ca-key.pem"), []byte("damaged\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	write("https://mirror-b.example.test/")
	_, err := m.reload()
	if err == nil || !strings.Contains(err.Error(), "mirror-b.example.test") {
		t.Errorf("reload: %v, want it to fail naming the public URL's host whose certificate could not be issued", err)
	}
	if last := m.configuration().LastReload; last == nil || last.Applied || !strings.Contains(last.Error, "certificate") {
		t.Errorf("last reload %+v, want it not applied, saying the certificate could not be issued", last)
	}
	if got := m.proxy.MirrorURL(httptest.NewRequest("GET", "/", nil)); got != "https://mirror-a.example.test/" {
		t.Errorf("public URL in force %q, want https://mirror-a.example.test/ (the host the certificate served names)", got)
	}
	if err := m.cert.Load().Leaf.VerifyHostname("mirror-a.example.test"); err != nil {
		t.Errorf("certificate served: %v", err)
	}
	for _, s := range m.configuration().Settings {
		if s.Name == "public-url" && s.Value != "https://mirror-a.example.test/" {
			t.Errorf("the status page's public_url %q, want the one in force", s.Value)
		}
	}
}
