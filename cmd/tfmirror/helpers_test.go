package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// routeRegistryTo is a dialer that connects to origin for tfRegistry and
// dials any other address as asked.
func routeRegistryTo(origin *fakeorigin.Origin) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, _, _ := net.SplitHostPort(addr); host == tfRegistry || host == tofuRegistry {
			addr = origin.Addr
		}
		return d.DialContext(ctx, network, addr)
	}
}

// trustingClient is an HTTP client that trusts the CA certificate in
// caFile (PEM), as a user who followed the mirror's SSL_CERT_FILE line.
func trustingClient(t *testing.T, caFile string) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", caFile)
	}
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool},
		MaxIdleConnsPerHost: 64,
	}}
}

// archiveURLs GETs versionURL (a VERSION.json) with the bearer token and
// returns the archive URL it lists for each platform, and the answer's
// headers.
func archiveURLs(t *testing.T, client *http.Client, versionURL, token string) (map[string]string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, versionURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Archives map[string]struct{ URL string } `json:"archives"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatalf("VERSION.json: %v", err)
	}
	urls := make(map[string]string, len(doc.Archives))
	for pl, a := range doc.Archives {
		urls[pl] = a.URL
	}
	return urls, resp.Header
}
