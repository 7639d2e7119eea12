package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"testing"

	"github.com/tfmirror/tfmirror/internal/fakeorigin"
)

// routeRegistryTo is a dialer that connects to origin for tfRegistry and
// dials any other address as asked.
func routeRegistryTo(origin *fakeorigin.Origin) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, _, _ := net.SplitHostPort(addr); host == tfRegistry {
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
