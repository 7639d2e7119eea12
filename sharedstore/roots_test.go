package sharedstore_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/certs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
	"github.com/tfmirror/tfmirror/v2/internal/tlsroots"
	"github.com/tfmirror/tfmirror/v2/sharedstore"
)

// TestRootCAs: the endpoint's TLS certificate is checked against
// Config.RootCAs (the system roots with the origin CAs added, in serve),
// and the SDK's own AWS_CA_BUNDLE is trusted beside them, without being
// added to the pool given: in serve, that pool is the origin client's
// too, which must not trust the store's CA bundle.
func TestRootCAs(t *testing.T) {
	srv := noObjectEndpoint(t)
	trusting := x509.NewCertPool()
	trusting.AddCert(srv.Certificate())
	other := x509.NewCertPool()

	get := func(roots *x509.CertPool) error {
		t.Helper()
		s, err := sharedstore.Open(context.Background(), sharedstore.Config{
			URL:         "s3://tfm/p?region=us-east-1&path_style=true&endpoint=" + srv.URL,
			CallTimeout: 10 * time.Second, BreakerThreshold: 100, BreakerCooldown: time.Minute, RootCAs: tlsroots.New(roots), Keys: testKeys(t),
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
		t.Errorf("AWS_CA_BUNDLE naming the endpoint's CA is not trusted beside RootCAs: %v", err)
	}
	if !other.Equal(x509.NewCertPool()) {
		t.Error("AWS_CA_BUNDLE's CAs were added to the pool given as RootCAs, which the origin client shares in serve")
	}
}

// noObjectEndpoint is an S3 endpoint over TLS that has no object (any GET
// is 404, as S3 answers), with the AWS environment of a store that needs
// no file: static credentials, no CA bundle.
func noObjectEndpoint(t *testing.T) *httptest.Server {
	t.Helper()
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
	return srv
}

// TestRootCAsFollowed: the CAs put in force while the store is used (the
// company's CA renewed in origin_ca_file's files) are those the
// endpoint's certificate is checked against from then on, both ways: a
// CA added is trusted, a CA taken out is not, though a connection it
// verified is still open. With a CA bundle of the SDK's own
// (AWS_CA_BUNDLE), the CAs in force at Open stay, as documented, and
// Open warns of it: the operator is told by reload that new CAs are in
// force.
func TestRootCAsFollowed(t *testing.T) {
	srv := noObjectEndpoint(t)
	trusting := x509.NewCertPool()
	trusting.AddCert(srv.Certificate())
	other := x509.NewCertPool()
	var log logbuf.Buffer
	open := func(roots *tlsroots.Roots) *sharedstore.Store {
		t.Helper()
		s, err := sharedstore.Open(context.Background(), sharedstore.Config{
			URL:         "s3://tfm/p?region=us-east-1&path_style=true&endpoint=" + srv.URL,
			CallTimeout: 10 * time.Second, BreakerThreshold: 100, BreakerCooldown: time.Minute, RootCAs: roots, Keys: testKeys(t),
			Logger: slog.New(slog.NewTextHandler(&log, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	get := func(s *sharedstore.Store) error {
		_, _, err := s.GetMeta(context.Background(), "k")
		return err
	}

	roots := tlsroots.New(other)
	s := open(roots)
	if strings.Contains(log.String(), "not followed") {
		t.Errorf("without a CA bundle of the SDK's, Open logged:\n%s", log.String())
	}
	for i, step := range []struct {
		pool  *x509.CertPool
		trust bool
	}{{other, false}, {trusting, true}, {other, false}, {trusting, true}} {
		if i > 0 {
			roots.Set(step.pool)
		}
		err := get(s)
		if step.trust && err != nil {
			t.Errorf("step %d: with the endpoint's CA put in force: %v", i, err)
		}
		if !step.trust && (err == nil || !strings.Contains(err.Error(), "certificate")) {
			t.Errorf("step %d: with the endpoint's CA taken out: %v, want a certificate error", i, err)
		}
	}

	unrelated, err := certs.Ensure(t.TempDir(), []string{"elsewhere.test"}, time.Now()) // a CA that did not sign the endpoint's certificate
	if err != nil {
		t.Fatal(err)
	}
	bundle := unrelated.CA
	t.Setenv("AWS_CA_BUNDLE", bundle)
	roots = tlsroots.New(trusting)
	s = open(roots)
	roots.Set(other)
	if err := get(s); err != nil {
		t.Errorf("with AWS_CA_BUNDLE set, the CAs in force at Open did not stay: %v", err)
	}
	if !strings.Contains(log.String(), "level=WARN") || !strings.Contains(log.String(), "not followed") {
		t.Errorf("with AWS_CA_BUNDLE set, Open logged:\n%s\nwant a warning that the CAs put in force later are not followed", log.String())
	}
}

// TestRootCAsFollowedByCredentialRequests: the requests the AWS
// configuration's credential providers make (STS for a web identity, as
// EKS's IRSA gives a pod) follow the CAs put in force as the store's own
// requests do, so that a company CA renewed while the mirror serves does
// not cut the replicas off their bucket once their credentials expire.
func TestRootCAsFollowedByCredentialRequests(t *testing.T) {
	var assumed atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.ParseForm() == nil && r.PostForm.Get("Action") == "AssumeRoleWithWebIdentity" {
			assumed.Add(1)
			w.Header().Set("Content-Type", "text/xml")
			fmt.Fprintf(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleWithWebIdentityResult>`+
				`<Credentials><AccessKeyId>AKIDEXAMPLE</AccessKeyId><SecretAccessKey>secret</SecretAccessKey><SessionToken>token</SessionToken>`+
				`<Expiration>%s</Expiration></Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>`,
				time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
			return
		}
		w.Header().Set("Content-Type", "application/xml") // no object, as S3 answers
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>none</Message></Error>`))
	}))
	t.Cleanup(srv.Close)
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("a-web-identity-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	s3test.NoAWSConfig(t, map[string]string{"AWS_WEB_IDENTITY_TOKEN_FILE": token, "AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/tfmirror",
		"AWS_ENDPOINT_URL_STS": srv.URL})
	trusting := x509.NewCertPool()
	trusting.AddCert(srv.Certificate())
	roots := tlsroots.New(x509.NewCertPool())
	s, err := sharedstore.Open(context.Background(), sharedstore.Config{
		URL:         "s3://tfm/p?region=us-east-1&path_style=true&endpoint=" + srv.URL,
		CallTimeout: 10 * time.Second, BreakerThreshold: 100, BreakerCooldown: time.Minute, RootCAs: roots, Keys: testKeys(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.GetMeta(context.Background(), "k"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("with the endpoints' CA not in force: %v, want a certificate error", err)
	}
	roots.Set(trusting)
	if _, _, err := s.GetMeta(context.Background(), "k"); err != nil || assumed.Load() == 0 {
		t.Errorf("with the endpoints' CA put in force: %v, after %d AssumeRoleWithWebIdentity calls", err, assumed.Load())
	}
}
