package certs

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
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
	for _, p := range []string{f.Key, filepath.Join(dir, caKeyFile)} {
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
