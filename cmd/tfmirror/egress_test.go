package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/certs"
)

// TestOriginRoots: origin_ca_file's certificates are added to the roots it
// is given (several files, a file holding several certificates), which
// keep trusting what they trusted; a missing file or one without a
// certificate stops start-up, naming the setting.
func TestOriginRoots(t *testing.T) {
	dir := t.TempDir()
	a, b, sys := newCompanyCA(t), newCompanyCA(t), newCompanyCA(t)
	bundle := filepath.Join(dir, "bundle.pem")
	os.WriteFile(bundle, append(append([]byte("# the company's CAs\n"), a.pem...), b.pem...), 0o644)
	c := newCompanyCA(t)
	single := c.file(t)
	empty := filepath.Join(dir, "empty.pem")
	os.WriteFile(empty, []byte("not a certificate\n"), 0o644)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	base := x509.NewCertPool()
	base.AddCert(sys.cert)
	pool, err := originRoots([]string{bundle, single}, base, log)
	if err != nil {
		t.Fatal(err)
	}
	for name, ca := range map[string]*companyCA{"first of the bundle": a, "second of the bundle": b, "second file": c, "system root": sys} {
		leaf, err := ca.leaf("registry.example.com")
		if err != nil {
			t.Fatal(err)
		}
		cert, _ := x509.ParseCertificate(leaf.Certificate[0])
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "registry.example.com"}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// The roots given are not changed.
	leaf, _ := a.leaf("registry.example.com")
	cert, _ := x509.ParseCertificate(leaf.Certificate[0])
	if _, err := cert.Verify(x509.VerifyOptions{Roots: base, DNSName: "registry.example.com"}); err == nil {
		t.Error("the system roots were changed in place")
	}
	if got, _ := originRoots(nil, base, log); got != base {
		t.Error("without origin_ca_file the roots are not the system's")
	}
	for _, files := range [][]string{{empty}, {filepath.Join(dir, "missing.pem")}, {bundle, empty}} {
		if _, err := originRoots(files, base, log); err == nil || !strings.Contains(err.Error(), "--origin-ca-file") {
			t.Errorf("%v: %v, want an error naming --origin-ca-file", files, err)
		}
	}
}

// TestOriginCAFileStopsStart: serve refuses to start on an origin_ca_file
// that holds no certificate, rather than run without the CA.
func TestOriginCAFileStopsStart(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(empty, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), 0o600)
	eff, err := parseServeConfig([]string{"--data-dir", t.TempDir(), "--origin-ca-file", empty}, func(string) (string, bool) { return "", false }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_, err = newServer(eff.Config, slog.New(slog.NewTextHandler(io.Discard, nil)), overrides{})
	if err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("newServer: %v, want a refusal of the file", err)
	}
}

// TestGeneratedCertificateNames: the generated certificate names
// public_url's host and every tls_san, besides localhost and loopback,
// and one that lacks a name given later is issued again from the same CA.
func TestGeneratedCertificateNames(t *testing.T) {
	data := t.TempDir()
	start := func(args ...string) *server {
		t.Helper()
		eff, err := parseServeConfig(append([]string{"--data-dir", data}, args...), func(string) (string, bool) { return "", false }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		m := &server{cfg: eff.Config, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		if err := m.setupTLS(); err != nil {
			t.Fatal(err)
		}
		return m
	}
	check := func(m *server, names ...string) {
		t.Helper()
		caPEM, err := os.ReadFile(m.caFile)
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(caPEM)
		leaf, err := x509.ParseCertificate(m.cert.Load().Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: n, CurrentTime: time.Now()}); err != nil {
				t.Errorf("the certificate does not name %s: %v", n, err)
			}
		}
	}
	m := start()
	check(m, "localhost", "127.0.0.1")
	if leafNames(t, *m.cert.Load()).Contains("tfmirror.tfmirror.svc") {
		t.Fatal("the set-up is broken")
	}
	caBefore, _ := os.ReadFile(filepath.Join(data, "tls", certs.CAFile))

	m = start("--public-url", "https://mirror.corp.example/", "--tls-san", "tfmirror.tfmirror.svc,tfmirror.tfmirror.svc.cluster.local,10.0.0.7")
	check(m, "localhost", "127.0.0.1", "mirror.corp.example", "tfmirror.tfmirror.svc", "tfmirror.tfmirror.svc.cluster.local", "10.0.0.7")
	if caAfter, _ := os.ReadFile(filepath.Join(data, "tls", certs.CAFile)); !bytes.Equal(caBefore, caAfter) {
		t.Error("a new name made a new CA: clients that trusted the old one no longer trust the mirror")
	}

	for _, bad := range []string{"tfmirror..svc", "-x.example", "a b", "mirror.example.com."} {
		if _, err := parseServeConfig([]string{"--data-dir", data, "--tls-san", bad}, func(string) (string, bool) { return "", false }, io.Discard); err == nil {
			t.Errorf("--tls-san %q accepted", bad)
		}
	}
}

type nameSet map[string]bool

func (s nameSet) Contains(n string) bool { return s[n] }

func leafNames(t *testing.T, c tls.Certificate) nameSet {
	t.Helper()
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	s := nameSet{}
	for _, n := range leaf.DNSNames {
		s[n] = true
	}
	return s
}
