package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/internal/certs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// operatorPair is a certificate for 127.0.0.1 and localhost issued at
// issued by a CA of its own, in dir: what an operator's PKI gives.
func operatorPair(t *testing.T, dir string, issued time.Time) (cert, key, ca []byte) {
	t.Helper()
	files, err := certs.Ensure(dir, []string{"127.0.0.1", "localhost"}, issued)
	if err != nil {
		t.Fatal(err)
	}
	read := func(path string) []byte {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return read(files.Cert), read(files.Key), read(files.CA)
}

// replacePair writes cert and key in the place of the operator's files
// as the kubelet updates a mounted Secret: each written whole, then
// renamed over the one there.
func replacePair(t *testing.T, certFile, keyFile string, cert, key []byte) {
	t.Helper()
	for path, b := range map[string][]byte{certFile: cert, keyFile: key} {
		tmp := path + ".new"
		writePrivate(t, tmp, string(b))
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOperatorCertificateRenewedInPlaceIsServed: the operator's
// certificate (--tls-cert) renewed in its files while the mirror serves
// (cert-manager's Secret updated in the pod) is served from the next
// handshake a minute on at most, and at once on tfmirror reload, without
// a restart; the metrics say when the certificate served expires and
// count each one put in force. A pair the files hold that would not work
// (a key of another certificate, an expired certificate) is refused,
// logged and counted once, and the certificate in force stays. It was
// read at start only: the certificate renewed in its place was not
// served until someone restarted the mirror, and the one served expired
// under it, every client refused.
func TestOperatorCertificateRenewedInPlaceIsServed(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	certA, keyA, _ := operatorPair(t, filepath.Join(dir, "a"), now.Add(-300*24*time.Hour))
	certB, keyB, _ := operatorPair(t, filepath.Join(dir, "b"), now)
	certC, keyC, _ := operatorPair(t, filepath.Join(dir, "c"), now.Add(-time.Hour))
	certOld, keyOld, _ := operatorPair(t, filepath.Join(dir, "old"), now.Add(-2*365*24*time.Hour))
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	replacePair(t, certFile, keyFile, certA, keyA)

	m, _ := reloadingServer(t, []string{"--data-dir", filepath.Join(dir, "data"), "--tls-cert", certFile, "--tls-key", keyFile})
	clock := now
	m.now = func() time.Time { return clock }
	served := func() *x509.Certificate {
		t.Helper()
		c, err := m.tls.GetCertificate(&tls.ClientHelloInfo{ServerName: "localhost"})
		if err != nil {
			t.Fatal(err)
		}
		return c.Leaf
	}
	leafOf := func(pemCert []byte) *x509.Certificate {
		t.Helper()
		block, _ := pem.Decode(pemCert)
		leaf, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return leaf
	}
	wantServed := func(when string, pemCert []byte) {
		t.Helper()
		if got, want := served(), leafOf(pemCert); !bytes.Equal(got.Raw, want.Raw) {
			t.Errorf("%s: the certificate served expires %s, want the one expiring %s", when, got.NotAfter, want.NotAfter)
		}
		if got, want := metric(t, m.registry, "tfmirror_tls_certificate_expiry_timestamp_seconds"), float64(leafOf(pemCert).NotAfter.Unix()); got != want {
			t.Errorf("%s: tfmirror_tls_certificate_expiry_timestamp_seconds %v, want %v", when, got, want)
		}
	}
	wantCounted := func(when string, applied, refused float64, inForce float64) {
		t.Helper()
		for outcome, want := range map[string]float64{"applied": applied, "refused": refused} {
			if got := metric(t, m.registry, "tfmirror_tls_certificate_reloads_total", "outcome", outcome); got != want {
				t.Errorf("%s: tfmirror_tls_certificate_reloads_total{outcome=%q} %v, want %v", when, outcome, got, want)
			}
		}
		if got := metric(t, m.registry, "tfmirror_tls_certificate_last_reload_successful"); got != inForce {
			t.Errorf("%s: tfmirror_tls_certificate_last_reload_successful %v, want %v", when, got, inForce)
		}
	}
	wantServed("at start", certA)

	// Renewed in place: within the minute, the one read stays; after
	// it, the renewed one is served.
	replacePair(t, certFile, keyFile, certB, keyB)
	clock = clock.Add(10 * time.Second)
	wantServed("10 s after the files were renewed", certA)
	clock = clock.Add(certCheckEvery)
	wantServed("a minute after the files were renewed", certB)
	wantCounted("renewed", 1, 0, 1)

	// Half of a copy (a new certificate, the key still the old one's):
	// refused once, the one in force served, however often it is read.
	replacePair(t, certFile, keyFile, certC, keyB)
	for range 3 {
		clock = clock.Add(certCheckEvery)
		wantServed("the files holding a certificate and another's key", certB)
	}
	wantCounted("a certificate with another's key", 1, 1, 0)
	wantStatus := func(when string, refused bool, pemCert []byte) {
		t.Helper()
		rec := httptest.NewRecorder()
		m.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/?format=json", nil))
		var st struct {
			Health struct {
				Expires time.Time `json:"certificate_expires"`
				Refused bool      `json:"certificate_refused"`
			} `json:"health"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
			t.Fatalf("%s: status page: %v\n%s", when, err, rec.Body)
		}
		if !st.Health.Expires.Equal(leafOf(pemCert).NotAfter) || st.Health.Refused != refused {
			t.Errorf("%s: the status page says the certificate expires %s, refused %v; want %s, %v",
				when, st.Health.Expires, st.Health.Refused, leafOf(pemCert).NotAfter, refused)
		}
	}
	wantStatus("a certificate with another's key", true, certB)
	res, err := m.reload()
	if err == nil || !strings.Contains(err.Error(), "TLS certificate "+certFile+" refused") || res.Certificate != nil {
		t.Errorf("tfmirror reload of a certificate with another's key: %+v, %v; want it refused, naming the file", res, err)
	}

	// An expired certificate is refused too: the one in force is valid.
	replacePair(t, certFile, keyFile, certOld, keyOld)
	if _, err := m.reload(); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("tfmirror reload of an expired certificate: %v; want it refused as expired", err)
	}
	wantServed("the files holding an expired certificate", certB)
	wantCounted("an expired certificate", 1, 2, 0)

	// tfmirror reload puts the renewed one in force at once, and says so.
	replacePair(t, certFile, keyFile, certC, keyC)
	res, err = m.reload()
	if err != nil || res.Certificate == nil || !res.CertificateNew || !res.Certificate.Equal(leafOf(certC).NotAfter) {
		t.Fatalf("tfmirror reload of a renewed certificate: %+v, %v; want it in force, with when it expires", res, err)
	}
	var out strings.Builder
	printReloaded(&out, res)
	if !strings.Contains(out.String(), "TLS certificate: a new one in force, expires ") {
		t.Errorf("tfmirror reload printed:\n%s\nwant the new certificate said", out.String())
	}
	wantServed("after tfmirror reload", certC)
	wantCounted("after tfmirror reload", 2, 2, 1)
	wantStatus("after tfmirror reload", false, certC)

	// Nothing changed: a reload says so, with the expiry of the one in
	// force, and counts nothing.
	res, err = m.reload()
	if err != nil || res.CertificateNew || res.Certificate == nil || !res.Certificate.Equal(leafOf(certC).NotAfter) {
		t.Errorf("tfmirror reload with the files unchanged: %+v, %v", res, err)
	}
	out.Reset()
	printReloaded(&out, res)
	if !strings.Contains(out.String(), "TLS certificate: unchanged, expires "+leafOf(certC).NotAfter.UTC().Format(time.RFC3339)) {
		t.Errorf("tfmirror reload with the files unchanged printed:\n%s\nwant the certificate in force said unchanged", out.String())
	}
	wantCounted("a reload with the files unchanged", 2, 2, 1)
}

// TestOperatorCertificateRenewedInPlaceProcess: a running tfmirror serve
// whose certificate files (--tls-cert, --tls-key) are renewed in place
// serves the new certificate once tfmirror reload runs: a client that
// trusts only the new certificate's CA connects, one that trusts only the
// old one's is refused. Until then it restarted to serve it.
func TestOperatorCertificateRenewedInPlaceProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	certA, keyA, caA := operatorPair(t, filepath.Join(dir, "a"), time.Now())
	certB, keyB, caB := operatorPair(t, filepath.Join(dir, "b"), time.Now())
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	replacePair(t, certFile, keyFile, certA, keyA)
	origin := newOrigin(t, fakeorigin.Options{})
	dataDir := filepath.Join(dir, "data")
	p := startProcess(t, bin, dataDir, origin, originCAFile(t, origin), "--tls-cert", certFile, "--tls-key", keyFile)

	handshake := func(ca []byte) error {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		conn, err := tls.Dial("tcp", p.addr, &tls.Config{RootCAs: pool, ServerName: "localhost"})
		if err == nil {
			conn.Close()
		}
		return err
	}
	if err := handshake(caA); err != nil {
		t.Fatalf("a client trusting the certificate's CA, at start: %v", err)
	}

	replacePair(t, certFile, keyFile, certB, keyB)
	stdout, stderr, code := runProcess(t, bin, "", "reload", "--data-dir", dataDir)
	if code != 0 || !strings.Contains(stdout, "TLS certificate: a new one in force") {
		t.Fatalf("tfmirror reload after the certificate was renewed: exit %d\n%s%s", code, stdout, stderr)
	}
	if err := handshake(caB); err != nil {
		t.Errorf("a client trusting the renewed certificate's CA, after tfmirror reload: %v", err)
	}
	if err := handshake(caA); err == nil {
		t.Error("a client trusting only the old certificate's CA still connects after tfmirror reload: the old certificate is served")
	}
	p.waitLog("put in force the certificate read again from the operator's files", 10*time.Second)
}

// TestOperatorCertificateRestoredAfterRefusal: the operator's files put
// back to the certificate in force after a pair was refused (a copy of
// the wrong key undone) are said to be in force again: the status page
// no longer says the last one read was refused,
// tfmirror_tls_certificate_last_reload_successful is 1 again, and the
// same wrong pair written again later is logged and counted again. The
// refusal stayed said, and the alert fired, until a restart or the next
// renewal.
func TestOperatorCertificateRestoredAfterRefusal(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	certA, keyA, _ := operatorPair(t, filepath.Join(dir, "a"), now.Add(-time.Hour))
	_, keyB, _ := operatorPair(t, filepath.Join(dir, "b"), now.Add(-time.Hour))
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	replacePair(t, certFile, keyFile, certA, keyA)
	m, _ := reloadingServer(t, []string{"--data-dir", filepath.Join(dir, "data"), "--tls-cert", certFile, "--tls-key", keyFile})
	lastOK := func() float64 {
		return metric(t, m.registry, "tfmirror_tls_certificate_last_reload_successful")
	}
	refusedCount := func() float64 {
		return metric(t, m.registry, "tfmirror_tls_certificate_reloads_total", "outcome", "refused")
	}

	replacePair(t, certFile, keyFile, certA, keyB)
	if _, err := m.reload(); err == nil {
		t.Fatal("a certificate with another's key was not refused")
	}
	if !m.certOutcome.refused.Load() || lastOK() != 0 || refusedCount() != 1 {
		t.Fatalf("a certificate with another's key: refused %v, last_reload_successful %v, refused counted %v",
			m.certOutcome.refused.Load(), lastOK(), refusedCount())
	}

	replacePair(t, certFile, keyFile, certA, keyA)
	if res, err := m.reload(); err != nil || res.CertificateNew {
		t.Fatalf("tfmirror reload of the files put back: %+v, %v; want nothing new, nothing refused", res, err)
	}
	if m.certOutcome.refused.Load() || lastOK() != 1 {
		t.Errorf("the files put back to the certificate in force: the status page says refused %v, last_reload_successful %v; want not refused, 1",
			m.certOutcome.refused.Load(), lastOK())
	}

	replacePair(t, certFile, keyFile, certA, keyB)
	_, _ = m.reload()
	if got := refusedCount(); got != 2 || lastOK() != 0 {
		t.Errorf("the wrong key written again: refused counted %v, last_reload_successful %v; want 2, 0", got, lastOK())
	}
}

// TestOperatorCertificateFollowedAfterClockSetBack: a mirror started
// while the machine's clock was ahead (a first start before NTP set it
// right) still reads its certificate files again at handshakes once the
// clock is set back. The last reading, stamped in the future, made every
// handshake until the clock reached it find it recent: a certificate
// renewed in the files was not served until then, or until a reload.
func TestOperatorCertificateFollowedAfterClockSetBack(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	certA, keyA, _ := operatorPair(t, filepath.Join(dir, "a"), now.Add(-time.Hour))
	certB, keyB, _ := operatorPair(t, filepath.Join(dir, "b"), now.Add(-time.Hour))
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	replacePair(t, certFile, keyFile, certA, keyA)
	var served atomic.Pointer[tls.Certificate]
	clock := now.Add(30 * 24 * time.Hour) // ahead at start
	cfg := settings.Config{TLSCert: certFile, TLSKey: keyFile}
	oc, err := startOperatorCert(cfg, &served, func() time.Time { return clock }, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	clock = now // set right
	replacePair(t, certFile, keyFile, certB, keyB)
	clock = clock.Add(2 * certCheckEvery)
	oc.recheckIfDue()
	block, _ := pem.Decode(certB)
	if !bytes.Equal(served.Load().Certificate[0], block.Bytes) {
		t.Error("the certificate renewed in the files is not served two minutes after the clock was set back")
	}
}

// TestOperatorCertificateSecretSwappedWhileRead: a mounted Secret whose
// ..data link the kubelet swaps between the reading of tls.crt and that
// of tls.key is read again, and its new pair put in force, not refused
// as a certificate with another's key (logged as an error, counted, the
// status page and TfmirrorTLSCertificateRefused saying so until the next
// handshake a minute on).
func TestOperatorCertificateSecretSwappedWhileRead(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	certA, keyA, _ := operatorPair(t, filepath.Join(dir, "a"), now.Add(-time.Hour))
	certB, keyB, _ := operatorPair(t, filepath.Join(dir, "b"), now.Add(-time.Hour))
	vol := filepath.Join(dir, "vol")
	for v, pair := range map[string][2][]byte{"..v1": {certA, keyA}, "..v2": {certB, keyB}} {
		if err := os.MkdirAll(filepath.Join(vol, v), 0o755); err != nil {
			t.Fatal(err)
		}
		writePrivate(t, filepath.Join(vol, v, "tls.crt"), string(pair[0]))
		writePrivate(t, filepath.Join(vol, v, "tls.key"), string(pair[1]))
	}
	for link, to := range map[string]string{"..data": "..v1", "tls.crt": "..data/tls.crt", "tls.key": "..data/tls.key"} {
		if err := os.Symlink(to, filepath.Join(vol, link)); err != nil {
			t.Fatal(err)
		}
	}
	var served atomic.Pointer[tls.Certificate]
	var outcome certOutcome
	cfg := settings.Config{TLSCert: filepath.Join(vol, "tls.crt"), TLSKey: filepath.Join(vol, "tls.key")}
	oc, err := startOperatorCert(cfg, &served, time.Now, slog.New(slog.DiscardHandler), outcome.count)
	if err != nil {
		t.Fatal(err)
	}
	swapped := false
	afterCertRead = func() {
		if swapped {
			return
		}
		swapped = true
		if err := os.Symlink("..v2", filepath.Join(vol, "..tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(vol, "..tmp"), filepath.Join(vol, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { afterCertRead = nil })
	if changed, err := oc.recheck(); !changed || err != nil || outcome.refused.Load() {
		t.Errorf("the Secret swapped while it was read: changed %v, %v, refused %v; want the new pair in force", changed, err, outcome.refused.Load())
	}
	block, _ := pem.Decode(certB)
	if !bytes.Equal(served.Load().Certificate[0], block.Bytes) {
		t.Error("the Secret's new certificate is not served")
	}
}
