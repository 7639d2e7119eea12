package sharedstore_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/sharedstore"
)

// TestRootCAs: the endpoint's TLS certificate is checked against
// Config.RootCAs (the system roots with the origin CAs added, in serve),
// and the SDK's own AWS_CA_BUNDLE wins over them.
func TestRootCAs(t *testing.T) {
	// An endpoint that has no object: any GET is 404, as S3 answers.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>none</Message></Error>`))
	}))
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CA_BUNDLE", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	trusting := x509.NewCertPool()
	trusting.AddCert(srv.Certificate())
	other := x509.NewCertPool()

	get := func(roots *x509.CertPool) error {
		t.Helper()
		s, err := sharedstore.Open(context.Background(), sharedstore.Config{
			URL:         "s3://tfm/p?region=us-east-1&path_style=true&endpoint=" + srv.URL,
			CallTimeout: 10 * time.Second, BreakerThreshold: 100, BreakerCooldown: time.Minute, RootCAs: roots, Keys: testKeys(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = s.GetMeta(context.Background(), "k")
		return err
	}
	if err := get(trusting); err != nil {
		t.Errorf("with the endpoint's CA in RootCAs: %v", err)
	}
	if err := get(other); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("with RootCAs lacking the endpoint's CA: %v, want a certificate error", err)
	}
	bundle := filepath.Join(t.TempDir(), "bundle.pem")
	if err := os.WriteFile(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CA_BUNDLE", bundle)
	if err := get(other); err != nil {
		t.Errorf("AWS_CA_BUNDLE naming the endpoint's CA does not win over RootCAs: %v", err)
	}
}
