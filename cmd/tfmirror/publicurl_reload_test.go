package main

import (
	"crypto/tls"
	"crypto/x509"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// The certificate tfmirror generates names the host of --public-url
// (docs/operations.md, "Certificates clients can check"), and public_url
// is reloadable: a reload that puts a new public URL in force, so that
// the status page tells every client to use its host, either has the
// mirror serve a certificate naming that host or says that it takes a
// restart. Otherwise clients that follow the page are refused with a
// certificate error, and nothing told the operator why.
func TestPublicURLReloadCertificateNamesNewHost(t *testing.T) {
	t.Parallel()
	e := &e2e{t: t, config: filepath.Join(t.TempDir(), "tfmirror.hcl")}
	origin, err := fakeorigin.Start(fakeorigin.Options{Hostnames: e2eOrigins})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	e.origin = origin
	write := func(publicURL string) {
		t.Helper()
		if err := os.WriteFile(e.config, []byte("public_url = \""+publicURL+"\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("https://mirror-a.example.test/")
	e.startMirror(filepath.Join(t.TempDir(), "data"))
	pem, err := os.ReadFile(e.caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	u, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	// handshake connects to the mirror as a client that reached it by name.
	handshake := func(name string) error {
		c, err := tls.Dial("tcp", u.Host, &tls.Config{RootCAs: pool, ServerName: name})
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := handshake("mirror-a.example.test"); err != nil {
		t.Fatalf("the certificate at start does not name the public URL's host: %v", err)
	}

	write("https://mirror-b.example.test/")
	res, err := e.mirror.reload()
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	restart, found := false, false
	for _, s := range res.Settings {
		if s.Name == "public-url" {
			found, restart = true, s.Restart
		}
	}
	if !found {
		t.Fatalf("the reload does not name public_url changed: %+v", res.Settings)
	}
	if restart {
		return // said so: the old URL stays in force until a restart
	}
	if err := handshake("mirror-b.example.test"); err != nil {
		t.Errorf("the reload put public_url https://mirror-b.example.test/ in force (the status page names it to clients) and said nothing of a restart, but the mirror's generated certificate does not name its host: %v", err)
	}
}
