package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/dirsync"
	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
)

func TestEnsureServesTrustedTLS(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	f, err := Ensure(dir, []string{"localhost", "127.0.0.1", "::1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Created {
		t.Error("first Ensure should report a new certificate")
	}
	for _, p := range []string{f.Key, filepath.Join(dir, CAKeyFile)} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", p, st.Mode().Perm())
		}
	}

	// A TLS server with the generated pair is trusted by a client that
	// trusts only ca.pem, for each host name it was issued for.
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})}
	go srv.Serve(ln)
	defer srv.Close()

	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.pem holds no certificate")
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	for _, host := range []string{"localhost", "127.0.0.1"} {
		client := &http.Client{Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: host},
		}}
		resp, err := client.Get("https://127.0.0.1:" + port + "/")
		if err != nil {
			t.Fatalf("client trusting ca.pem, server name %s: %v", host, err)
		}
		resp.Body.Close()
	}
}

func TestEnsureReusesAndRenews(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	first, err := Ensure(dir, []string{"localhost"}, now)
	if err != nil {
		t.Fatal(err)
	}
	caBefore, _ := os.ReadFile(first.CA)
	certBefore, _ := os.ReadFile(first.Cert)

	tests := []struct {
		name        string
		hosts       []string
		now         time.Time
		wantNewCert bool
	}{
		{"same hosts reuse", []string{"localhost"}, now, false},
		{"new host reissues", []string{"localhost", "mirror.internal"}, now, true},
		{"near expiry reissues", []string{"localhost", "mirror.internal"}, now.Add(serverLifetime - 10*24*time.Hour), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Ensure(dir, tc.hosts, tc.now)
			if err != nil {
				t.Fatal(err)
			}
			if f.Created != tc.wantNewCert {
				t.Errorf("Created = %v, want %v", f.Created, tc.wantNewCert)
			}
			caNow, _ := os.ReadFile(f.CA)
			if string(caNow) != string(caBefore) {
				t.Error("the CA changed; clients would have to trust it again")
			}
		})
	}
	certAfter, _ := os.ReadFile(first.Cert)
	if string(certAfter) == string(certBefore) {
		t.Error("server certificate was never reissued")
	}
}

func TestEnsureNeedsHosts(t *testing.T) {
	if _, err := Ensure(t.TempDir(), nil, time.Now()); err == nil {
		t.Fatal("Ensure with no hosts succeeded")
	}
}

// TestServerCertificateEndsWithItsCA: a server certificate issued in the
// last year of its CA expires with the CA, not after it, so that it is
// renewed (RenewAt) when the CA is, and Ensure says it made a new CA
// then, which clients must trust instead. A serve running across the
// CA's end used to hand out, for months, a chain whose CA had expired,
// which every client refused, and a CA made anew at a start said nothing.
func TestServerCertificateEndsWithItsCA(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	first, err := Ensure(dir, []string{"localhost"}, start)
	if err != nil {
		t.Fatal(err)
	}
	if first.CAReplaced {
		t.Error("the first CA made is reported as replacing one")
	}
	caPEM, _ := os.ReadFile(first.CA)
	ca := parseFirst(t, caPEM)

	late := ca.NotAfter.Add(-200 * 24 * time.Hour)
	f, err := Ensure(dir, []string{"localhost"}, late)
	if err != nil {
		t.Fatal(err)
	}
	if f.CAReplaced {
		t.Error("the CA was replaced 200 days before it expires")
	}
	chain, _ := os.ReadFile(f.Cert)
	leaf := parseFirst(t, chain)
	if leaf.NotAfter.After(ca.NotAfter) {
		t.Fatalf("the server certificate issued 200 days before its CA expires (%s) expires after it (%s): clients refuse the chain once the CA has",
			ca.NotAfter.Format(time.DateOnly), leaf.NotAfter.Format(time.DateOnly))
	}

	renew := RenewAt(leaf).Add(time.Minute)
	f, err = Ensure(dir, []string{"localhost"}, renew)
	if err != nil {
		t.Fatal(err)
	}
	if !f.CAReplaced || !f.Created {
		t.Fatalf("at the renewal of the CA's last server certificate: CAReplaced %v, Created %v, want both", f.CAReplaced, f.Created)
	}
	newCAPEM, _ := os.ReadFile(f.CA)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(newCAPEM)
	chain, _ = os.ReadFile(f.Cert)
	if _, err := parseFirst(t, chain).Verify(x509.VerifyOptions{Roots: roots, DNSName: "localhost", CurrentTime: renew}); err != nil {
		t.Errorf("the renewed server certificate against the new CA: %v", err)
	}
}

func parseFirst(t *testing.T, pemData []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(pemData)
	if block == nil {
		t.Fatal("no PEM block")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCAWrittenWholeOrNotAtAll: a first start whose disk fills while it
// writes the new CA (its key written, its certificate not) leaves
// neither of its files, so that the next start, with room, makes the CA,
// instead of finding a key without its certificate, which is refused (a
// new CA would replace the one clients trust).
func TestCAWrittenWholeOrNotAtAll(t *testing.T) {
	dir := t.TempDir()
	full := errors.New("no space left on device")
	createTemp = func(d, pattern string) (*os.File, error) {
		if strings.Contains(pattern, CAFile) {
			return nil, full
		}
		return os.CreateTemp(d, pattern)
	}
	defer func() { createTemp = os.CreateTemp }()
	if _, err := Ensure(dir, []string{"localhost"}, time.Now()); !errors.Is(err, full) {
		t.Fatalf("Ensure on a full disk: %v", err)
	}
	createTemp = os.CreateTemp
	left, _ := os.ReadDir(dir)
	for _, e := range left {
		t.Errorf("the failed write left %s", e.Name())
	}
	if _, err := Ensure(dir, []string{"localhost"}, time.Now()); err != nil {
		t.Errorf("Ensure once there is room again: %v", err)
	}
}

// TestCAKeyModeChecked: the CA's key is a secret the mirror trusts, read
// as the other key files are (internal/inputfile.ReadTrusted): one its
// group or all users may write is refused, naming the chmod to run, and
// the CA is kept, never replaced by a new one that no client trusts.
func TestCAKeyModeChecked(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no mode bits")
	}
	dir := t.TempDir()
	if _, err := Ensure(dir, []string{"localhost"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, CAKeyFile)
	before, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o620, 0o602} {
		if err := os.Chmod(keyPath, mode); err != nil {
			t.Fatal(err)
		}
		_, err := Ensure(dir, []string{"localhost"}, time.Now())
		var we *inputfile.WritableError
		if !errors.As(err, &we) || we.Path != keyPath || !strings.Contains(err.Error(), "chmod go-w "+keyPath) {
			t.Errorf("a CA key of mode %04o: %v, want it refused naming it and the chmod to run", mode, err)
		}
		if after, _ := os.ReadFile(keyPath); string(after) != string(before) {
			t.Errorf("a CA key of mode %04o was replaced", mode)
		}
	}
}

// TestServerCertificateNotValidYetReissued: a server certificate issued
// while the clock was ahead (a VM's clock before NTP set it right, a
// renewal or a new public URL then) is not valid yet once the clock is
// right, and every client refuses it: Ensure issues it again, from the
// same CA, valid now, where it reused it (it expires late enough) and
// restarts served it until the clock caught up.
func TestServerCertificateNotValidYetReissued(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	first, err := Ensure(dir, []string{"localhost"}, now)
	if err != nil {
		t.Fatal(err)
	}
	caBefore, _ := os.ReadFile(first.CA)
	// The clock runs two days ahead when the certificate is issued again
	// for a new name; then it is set right.
	if _, err := Ensure(dir, []string{"localhost", "mirror.internal"}, now.Add(48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	f, err := Ensure(dir, []string{"localhost", "mirror.internal"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Created {
		t.Error("a server certificate not valid yet was reused")
	}
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if now.Before(leaf.NotBefore) {
		t.Errorf("the server certificate is valid from %v, after now (%v)", leaf.NotBefore, now)
	}
	if caNow, _ := os.ReadFile(f.CA); string(caNow) != string(caBefore) {
		t.Error("the CA changed; clients would have to trust it again")
	}
}

// TestCANotValidYetReplaced: a CA made while the clock was ahead (a VM's
// first start before NTP set its clock right) is not valid yet once the
// clock is right, and every client refuses every certificate it issues
// until its own start comes: Ensure makes a new CA, valid now, and says
// it replaced the one there (serve warns that clients must trust the
// new ca.pem), where it kept it and the mirror was refused by all.
func TestCANotValidYetReplaced(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	if _, err := Ensure(dir, []string{"localhost"}, now.Add(200*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	f, err := Ensure(dir, []string{"localhost"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !f.CAReplaced {
		t.Error("a CA not valid yet was kept, not said to be replaced")
	}
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "localhost", CurrentTime: now}); err != nil {
		t.Errorf("the server certificate, checked against ca.pem now: %v", err)
	}
	// Once replaced, it is kept.
	if again, err := Ensure(dir, []string{"localhost"}, now); err != nil || again.CAReplaced {
		t.Errorf("a second Ensure: replaced %v, %v", again.CAReplaced, err)
	}
}

// TestFirstCACutShortIsMadeAgain: a first start killed while it made the
// CA, between putting its key in place and its certificate, leaves the
// key alone, with no server certificate issued from it: the next Ensure
// makes the CA, where every start was refused for a certificate missing
// beside its key until someone removed the key. Once a server
// certificate was issued, a CA certificate missing is refused as before:
// clients may trust it.
func TestFirstCACutShortIsMadeAgain(t *testing.T) {
	dir := t.TempDir()
	f, err := Ensure(dir, []string{"localhost"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{f.CA, f.Cert, f.Key} {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
	if f, err = Ensure(dir, []string{"localhost"}, time.Now()); err != nil || !f.Created {
		t.Fatalf("Ensure after a first start cut short between the CA's key and its certificate: %+v, %v", f, err)
	}
	if err := os.Remove(f.CA); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(dir, []string{"localhost"}, time.Now()); err == nil || !strings.Contains(err.Error(), "is missing while") {
		t.Errorf("Ensure with ca.pem missing beside a server certificate issued from it: %v, want it refused", err)
	}
}

// TestGeneratedFilesNamesSynced: once the CA's files (and the server
// certificate's) are renamed into place, the directory is synced, so
// that a power loss does not take back the CA clients were just told
// to trust (a new one made at the next start, which none trusts), nor
// leave a key renamed in beside the certificate of the key before it.
func TestGeneratedFilesNamesSynced(t *testing.T) {
	dir := t.TempDir()
	var synced []string
	syncDir = func(d string) error {
		// What the renames put there is in place when the sync runs.
		for _, name := range []string{CAFile, CAKeyFile} {
			if _, err := os.Stat(filepath.Join(d, name)); err != nil {
				t.Errorf("synced %s before %s was there: %v", d, name, err)
			}
		}
		synced = append(synced, d)
		return nil
	}
	defer func() { syncDir = dirsync.Sync }()
	if _, err := Ensure(dir, []string{"localhost"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if len(synced) < 2 {
		t.Errorf("the directory was synced %d times after making a CA and a server certificate, want once for each", len(synced))
	}
	for _, d := range synced {
		if d != dir {
			t.Errorf("synced %s, want %s", d, dir)
		}
	}
	failed := errors.New("I/O error")
	syncDir = func(string) error { return failed }
	if _, err := Ensure(dir, []string{"localhost", "mirror.internal"}, time.Now()); !errors.Is(err, failed) {
		t.Errorf("Ensure whose directory sync failed: %v, want the failure", err)
	}
}

// TestLeftoverKeyCopiesRemoved: the temporary files of a process killed
// while it wrote the generated keys (a copy of the CA's private key, of
// the server's) are removed at the next Ensure once a minute old, where
// they stayed for ever beside the files, a copy of the CA key outliving
// the CA it signs for (replaced, or removed to have a new one made); a
// fresh one, another process's write under way, is left alone.
func TestLeftoverKeyCopiesRemoved(t *testing.T) {
	dir := t.TempDir()
	if _, err := Ensure(dir, []string{"localhost"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Minute)
	var stale []string
	for _, name := range []string{CAKeyFile, CAFile, ServerKeyFile, ServerFile} {
		path := filepath.Join(dir, ".tmp-"+name+"-123456")
		if err := os.WriteFile(path, key, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, old, old); err != nil {
			t.Fatal(err)
		}
		stale = append(stale, path)
	}
	fresh := filepath.Join(dir, ".tmp-"+CAKeyFile+"-654321")
	if err := os.WriteFile(fresh, key, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(dir, []string{"localhost"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, path := range stale {
		if _, err := os.Lstat(path); err == nil {
			t.Errorf("%s, left by a killed write, is still there", filepath.Base(path))
		}
	}
	if _, err := os.Lstat(fresh); err != nil {
		t.Errorf("%s, a write under way, was removed: %v", filepath.Base(fresh), err)
	}
}

// TestCAReplacementCutShortIsMadeAgain: a process killed while it
// replaced the CA due to expire, between putting the new key in place
// and the new certificate, leaves the new key beside the old CA's
// certificate; the next Ensure makes the new CA again (as the killed one
// was doing), where every start was refused for a key that does not
// match its certificate, and the mirror did not start again until
// someone removed the files. A key that does not match a CA not due for
// replacement stays refused: no crash leaves one.
func TestCAReplacementCutShortIsMadeAgain(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	first, err := Ensure(dir, []string{"localhost"}, now)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _ := os.ReadFile(first.CA)
	block, _ := pem.Decode(caPEM)
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	newKey := func() {
		t.Helper()
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		kf, err := keyFile(filepath.Join(dir, CAKeyFile), key)
		if err != nil {
			t.Fatal(err)
		}
		if err := writeAll(kf); err != nil {
			t.Fatal(err)
		}
	}

	newKey()
	if _, err := Ensure(dir, []string{"localhost"}, now); err == nil {
		t.Error("a CA key that does not match a CA not due for replacement was taken")
	}

	due := ca.NotAfter.Add(-10 * 24 * time.Hour)
	newKey()
	f, err := Ensure(dir, []string{"localhost"}, due)
	if err != nil {
		t.Fatalf("Ensure after a replacement of the CA cut short: %v", err)
	}
	if !f.CAReplaced {
		t.Error("the CA was not said replaced")
	}
	if _, err := tls.LoadX509KeyPair(f.CA, filepath.Join(dir, CAKeyFile)); err != nil {
		t.Errorf("the CA made again: %v", err)
	}
}
