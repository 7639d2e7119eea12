package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/internal/certs"
)

// TestGeneratedCertificateRenewedWhileServing: the certificate tfmirror
// generates (397 days) is issued again before it expires while the serve
// runs, from the same CA, not only at the next start: a serve started on
// a certificate with a month or two left (issued at an earlier start)
// went on serving it once it had expired, and every client was refused
// until someone restarted it.
func TestGeneratedCertificateRenewedWhileServing(t *testing.T) {
	data := t.TempDir()
	m, clock := clockedTLS(t, "--data-dir", data, "--tls-san", "tfmirror.tfmirror.svc")
	caBefore, err := os.ReadFile(filepath.Join(data, "tls", certs.CAFile))
	if err != nil {
		t.Fatal(err)
	}
	served := func() *x509.Certificate {
		t.Helper()
		c, err := m.tls.GetCertificate(&tls.ClientHelloInfo{ServerName: "tfmirror.tfmirror.svc"})
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf
	}
	first := served()

	// Weeks before it expires, the serve still running.
	later := first.NotAfter.Add(-20 * 24 * time.Hour)
	clock.Store(&later)
	renewed := served()
	if !renewed.NotAfter.After(first.NotAfter) {
		t.Fatalf("20 days before the certificate expires (%s) the serve still hands it out: clients are refused once it has",
			first.NotAfter.Format(time.DateOnly))
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caBefore)
	for _, name := range []string{"localhost", "127.0.0.1", "tfmirror.tfmirror.svc"} {
		if _, err := renewed.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, CurrentTime: later}); err != nil {
			t.Errorf("the renewed certificate, checked against the CA clients trust, for %s: %v", name, err)
		}
	}
	if caAfter, _ := os.ReadFile(filepath.Join(data, "tls", certs.CAFile)); !bytes.Equal(caBefore, caAfter) {
		t.Error("the renewal made a new CA: clients that trusted the old one no longer trust the mirror")
	}
	// Once renewed, the handshakes get the new certificate, issued once.
	if again := served(); !bytes.Equal(again.Raw, renewed.Raw) {
		t.Error("a second handshake issued the certificate again")
	}
}

// TestPublicURLReissueServesWhatItVouchesFor: a public URL put back
// (a reload from mirror-b to mirror-a again) is served with a certificate
// that names its host, even when the certificate on disk is no longer the
// one served: a renewal that ran between a reload's issue and its putting
// in force (a handshake finding the renewal due) left on disk one issued
// for mirror-a while mirror-b's was served, and the reload back to
// mirror-a, finding on disk a certificate that names it, served on the
// one of mirror-b, which every client of mirror-a refuses.
func TestPublicURLReissueServesWhatItVouchesFor(t *testing.T) {
	data := t.TempDir()
	m, clock := clockedTLS(t, "--data-dir", data, "--public-url", "https://mirror-a.example.test/")
	handshake := func() *x509.Certificate {
		t.Helper()
		c, err := m.tls.GetCertificate(&tls.ClientHelloInfo{ServerName: "mirror-a.example.test"})
		if err != nil {
			t.Fatal(err)
		}
		return c.Leaf
	}
	// The renewal comes due.
	later := handshake().NotAfter.Add(-20 * 24 * time.Hour)
	clock.Store(&later)

	b := m.cfg
	b.PublicURL = "https://mirror-b.example.test/"
	useB, err := m.reissueCert(b)
	if err != nil {
		t.Fatal(err)
	}
	handshake() // renews mirror-a's names, on disk and served
	useB()
	if err := handshake().VerifyHostname("mirror-b.example.test"); err != nil {
		t.Fatalf("after the reload to mirror-b: %v", err)
	}

	useA, err := m.reissueCert(m.cfg)
	if err != nil {
		t.Fatal(err)
	}
	useA()
	if err := handshake().VerifyHostname("mirror-a.example.test"); err != nil {
		t.Errorf("after the reload back to mirror-a, the certificate served: %v", err)
	}
}

// clockedTLS is the TLS of a server made of args (the generated
// certificate issued in its data directory), on a clock the test moves:
// set the time the returned pointer holds.
func clockedTLS(t *testing.T, args ...string) (*server, *atomic.Pointer[time.Time]) {
	t.Helper()
	eff, err := parseServeConfig(args, func(string) (string, bool) { return "", false }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	clock := new(atomic.Pointer[time.Time])
	start := time.Now()
	clock.Store(&start)
	m := &server{cfg: eff.Config, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		now: func() time.Time { return *clock.Load() }}
	if err := m.setupTLS(); err != nil {
		t.Fatal(err)
	}
	return m, clock
}

// TestGeneratedCARenewedWhileServing: a serve running when its generated
// CA comes within weeks of its end renews the server certificate (which
// ends with its CA) from a new CA, and warns that clients must trust the
// new ca.pem: it used to go on handing out a chain whose CA had expired,
// which every client refused, and said nothing.
func TestGeneratedCARenewedWhileServing(t *testing.T) {
	data := t.TempDir()
	m, clock := clockedTLS(t, "--data-dir", data)
	var logged bytes.Buffer
	m.log = slog.New(slog.NewTextHandler(&logged, nil))
	caFile := filepath.Join(data, "tls", certs.CAFile)
	caBefore, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(caBefore)
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	served := func() *x509.Certificate {
		t.Helper()
		c, err := m.tls.GetCertificate(&tls.ClientHelloInfo{ServerName: "localhost"})
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf
	}
	// The server certificate renewed, year after year, until the CA's end.
	for now := *clock.Load(); ; {
		leaf := served()
		if !leaf.NotAfter.Before(ca.NotAfter.Add(-24 * time.Hour)) {
			break
		}
		now = certs.RenewAt(leaf).Add(time.Minute)
		clock.Store(&now)
		if served().Equal(leaf) {
			t.Fatalf("not renewed at %s", now)
		}
		if now.After(ca.NotAfter) {
			t.Fatalf("the serve reached the CA's end (%s) still handing out a certificate that outlives it", ca.NotAfter)
		}
	}
	last := served()
	if last.NotAfter.After(ca.NotAfter) {
		t.Fatalf("the server certificate served expires %s, after its CA (%s)", last.NotAfter, ca.NotAfter)
	}
	now := certs.RenewAt(last).Add(time.Minute)
	clock.Store(&now)
	renewed := served()
	caAfter, _ := os.ReadFile(caFile)
	if bytes.Equal(caAfter, caBefore) {
		t.Fatal("the CA was not made anew weeks before its end")
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caAfter)
	if _, err := renewed.Verify(x509.VerifyOptions{Roots: roots, DNSName: "localhost", CurrentTime: now}); err != nil {
		t.Errorf("the certificate served against the new CA: %v", err)
	}
	if !strings.Contains(logged.String(), caReplacedWarning) || !strings.Contains(logged.String(), "level=WARN") {
		t.Errorf("the new CA was not warned of; logged:\n%s", logged.String())
	}
}

// TestGeneratedCertificateNotValidYetRenewedWhileServing: a certificate
// the serve issued while the clock was ahead (a reload's new public URL,
// before NTP set the clock right) is issued again at the first handshake
// that finds it not valid yet, from the same CA, where it was served on,
// refused by every client, until the clock caught up with it.
func TestGeneratedCertificateNotValidYetRenewedWhileServing(t *testing.T) {
	data := t.TempDir()
	m, clock := clockedTLS(t, "--data-dir", data)
	right := *clock.Load()
	ahead := right.Add(48 * time.Hour)
	clock.Store(&ahead)
	use, err := m.reissueCert(settings.Config{DataDir: data, PublicURL: "https://mirror.example.test/"})
	if err != nil {
		t.Fatal(err)
	}
	use()
	clock.Store(&right)
	c, err := m.tls.GetCertificate(&tls.ClientHelloInfo{ServerName: "mirror.example.test"})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if right.Before(leaf.NotBefore) {
		t.Fatalf("once the clock is set right, the serve hands out a certificate valid from %s only", leaf.NotBefore)
	}
	if err := leaf.VerifyHostname("mirror.example.test"); err != nil {
		t.Errorf("the certificate issued again: %v", err)
	}
}
