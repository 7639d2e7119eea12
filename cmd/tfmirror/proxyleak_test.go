package main

import (
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
	"github.com/tfmirror/tfmirror/v2/proxy"
)

// TestUpstreamProxyCertificateNamesNoProxy: an https:// upstream proxy
// whose certificate is issued for another name (the CA trusted) fails
// every client request with a 502 that names the proxy by its settings
// only, at every door: not the host name or port of its URL, nor the
// names its certificate is issued for, which x509's words for the
// mismatch give ("certificate is valid for proxy.other.example, not
// localhost"); nor does the status page's origin row, in its cause or its
// error, which anyone who reaches the mirror may read. The log has x509's
// words, for the operator, never the password of the proxy's URL.
func TestUpstreamProxyCertificateNamesNoProxy(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{})
	ca := newCompanyCA(t)
	leaf, err := ca.leaf("proxy.other.example")
	if err != nil {
		t.Fatal(err)
	}
	proxySrv := httptest.NewUnstartedServer(http.NotFoundHandler())
	proxySrv.TLS = &tls.Config{Certificates: []tls.Certificate{*leaf}}
	proxySrv.StartTLS()
	t.Cleanup(proxySrv.Close)
	_, port, _ := net.SplitHostPort(proxySrv.Listener.Addr().String())
	proxyURL := url.URL{Scheme: "https", User: url.UserPassword("mirror", "s3cret-proxy-pass"), Host: net.JoinHostPort("localhost", port)}
	roots := origin.CertPool()
	roots.AddCert(ca.cert)
	var logs logbuf.Buffer
	tm := startMirrorWith(t, origin, t.TempDir(), &logs, &overrides{origin: fastRetries, rootCAs: roots},
		"--allow-private-origins", "--upstream-proxy", proxyURL.String())
	secrets := []string{"localhost", ":" + port, "proxy.other.example", "s3cret"}
	for _, path := range []string{
		tfRegistry + "/hashicorp/random/index.json",
		"registry/" + tfRegistry + "/v1/providers/hashicorp/random/versions",
		"registry/" + tfRegistry + "/v1/modules/acme/vpc/aws/versions",
	} {
		resp, body, err := tm.get(path)
		if err != nil {
			t.Fatal(err)
		}
		wantJSONError(t, path, resp, body, http.StatusBadGateway, "TLS certificate of the upstream proxy")
		for _, s := range secrets {
			if strings.Contains(string(body), s) {
				t.Errorf("%s: the answer names %q: %s", path, s, body)
			}
		}
	}
	rows := originRows(t, tm)
	if len(rows) != 1 || rows[0].LastError == nil || !strings.Contains(rows[0].LastError.Cause, "upstream proxy") {
		t.Fatalf("the origin's row: %+v", rows)
	}
	row, _ := json.Marshal(rows[0])
	for _, s := range secrets {
		if strings.Contains(string(row), s) {
			t.Errorf("the status page's origin row names %q: %s", s, row)
		}
	}
	if logged := logs.String(); !strings.Contains(logged, "proxy.other.example") || strings.Contains(logged, "s3cret") {
		t.Errorf("the log has not x509's words, or names the password:\n%s", logged)
	}
}

// TestStatusPageNamesNoUpstreamProxy: with the upstream proxy not
// reached, the status page, HTML and JSON, as anyone who reaches the
// mirror reads it (no client authentication), names neither the proxy's
// address nor its password in its origin rows (their causes and their
// errors) or its health, nor do /readyz and /healthz; the origin rows
// say the proxy failed, by its settings. (The configuration, which shows
// the proxy's scheme and host to whom it is shown, is not served here.)
func TestStatusPageNamesNoUpstreamProxy(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	proxyURL := url.URL{Scheme: "http", User: url.UserPassword("mirror", "s3cret-proxy-pass"), Host: addr}
	tm := startMirrorWith(t, origin, t.TempDir(), &logbuf.Buffer{}, &overrides{origin: fastRetries},
		"--allow-private-origins", "--upstream-proxy", proxyURL.String())
	if resp, _, err := tm.get(tfRegistry + "/hashicorp/random/index.json"); err != nil || resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("through the proxy not reached: %v, %v", resp, err)
	}
	for _, path := range []string{"/?format=json", "/", "/readyz", "/healthz"} {
		_, body, err := tm.get(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{":" + port, "s3cret"} {
			if strings.Contains(string(body), s) {
				i := strings.Index(string(body), s)
				t.Errorf("%s names %q: ...%s...", path, s, body[max(0, i-200):min(len(body), i+100)])
			}
		}
	}
	var st proxy.Status
	_, body, _ := tm.get("/?format=json")
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Origins) != 1 || st.Origins[0].LastError == nil || !strings.Contains(st.Origins[0].LastError.Cause, "upstream proxy") {
		t.Errorf("the origin's row: %+v", st.Origins)
	}
}
