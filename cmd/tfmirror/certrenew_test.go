package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log/slog"
	"os"
	"os/exec"
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

// TestStartKeepsAValidCertificateItCannotRenew: a serve started when its
// generated certificate is due for renewal (weeks before it expires) on
// a data directory it cannot write (a full disk, a file system
// remounted read-only) serves the certificate there, still valid, with
// a warning, and tries the renewal again later, where it refused to
// start over a renewal that could wait. A first start that cannot write
// the CA still fails.
func TestStartKeepsAValidCertificateItCannotRenew(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("makes the tls directory immutable (chattr +i), which takes root")
	}
	if _, err := exec.LookPath("chattr"); err != nil {
		t.Skip("no chattr")
	}
	data := t.TempDir()
	first, clock := clockedTLS(t, "--data-dir", data)
	leaf := first.cert.Load().Leaf
	tlsDir := filepath.Join(data, "tls")
	if out, err := exec.Command("chattr", "+i", tlsDir).CombinedOutput(); err != nil {
		t.Skipf("chattr +i: %v: %s", err, out)
	}
	defer exec.Command("chattr", "-i", tlsDir).Run()

	due := leaf.NotAfter.Add(-20 * 24 * time.Hour)
	clock.Store(&due)
	var logged bytes.Buffer
	m := &server{cfg: first.cfg, log: slog.New(slog.NewTextHandler(&logged, nil)), now: func() time.Time { return *clock.Load() }}
	if err := m.setupTLS(); err != nil {
		t.Fatalf("a start whose certificate, valid for 20 more days, cannot be renewed: %v", err)
	}
	if m.tls == nil || m.caFile == "" {
		t.Fatal("the start serves no TLS, or names no CA for clients to trust")
	}
	if got, err := m.tls.GetCertificate(&tls.ClientHelloInfo{}); err != nil || !bytes.Equal(got.Leaf.Raw, leaf.Raw) {
		t.Error("the start serves another certificate than the one there")
	}
	if !strings.Contains(logged.String(), "level=WARN") || !strings.Contains(logged.String(), "renew") {
		t.Errorf("the start said nothing of the renewal it could not make:\n%s", logged.String())
	}
	if at := time.Unix(0, m.renewAt.Load()); !at.After(due) || at.After(due.Add(2*time.Hour)) {
		t.Errorf("the renewal is tried again at %s, want within hours of %s", at, due)
	}

	empty := t.TempDir()
	if out, err := exec.Command("chattr", "+i", empty).CombinedOutput(); err != nil {
		t.Fatalf("chattr +i: %v: %s", err, out)
	}
	defer exec.Command("chattr", "-i", empty).Run()
	cfg := first.cfg
	cfg.DataDir = empty
	if err := (&server{cfg: cfg, log: slog.New(slog.NewTextHandler(io.Discard, nil))}).setupTLS(); err == nil {
		t.Error("a first start that could not write the CA started")
	}
}

// TestCAReplacedWarningNamesTheCAAbsolute: the warning that the
// generated CA was replaced, and that clients must trust the new one,
// names its file by its absolute path, as the start's SSL_CERT_FILE line
// does, also for a data directory given relative, where it named it
// relative to the serve's working directory, which the operator reading
// the log (or a client's machine) does not share.
func TestCAReplacedWarningNamesTheCAAbsolute(t *testing.T) {
	base := t.TempDir()
	t.Chdir(base)
	m, clock := clockedTLS(t, "--data-dir", "data")
	var logged bytes.Buffer
	m.log = slog.New(slog.NewJSONHandler(&logged, nil))
	caPEM, err := os.ReadFile(filepath.Join(base, "data", "tls", certs.CAFile))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(caPEM)
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	due := ca.NotAfter.Add(-10 * 24 * time.Hour)
	clock.Store(&due)
	if _, err := m.tls.GetCertificate(&tls.ClientHelloInfo{ServerName: "localhost"}); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(base, "data", "tls", certs.CAFile)
	if !strings.Contains(logged.String(), "replaced") || !strings.Contains(logged.String(), `"ca_file":"`+want+`"`) {
		t.Errorf("the CA replaced, the log names it otherwise than %s:\n%s", want, logged.String())
	}
}
