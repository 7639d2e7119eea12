package main

// End-to-end tests of tfmirror behind a TLS-inspecting egress proxy: the
// real tfmirror process reaches its origin through a CONNECT proxy on
// loopback that terminates TLS with certificates of a "company CA" (not
// in the system roots) and talks to the origin itself, as a corporate
// egress point does; the real terraform installs through the mirror.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/proxy"
)

// companyCA is a CA of the tests' own, standing for a company's, which
// no system trusts.
type companyCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCompanyCA(t *testing.T) *companyCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Example Corp egress inspection CA", Organization: []string{"Example Corp"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &companyCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// leaf issues a server certificate for host (a name or an IP address).
func (ca *companyCA) leaf(host string) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: key}, nil
}

// file writes the CA's certificate to a new file and returns its path.
func (ca *companyCA) file(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "company-ca.pem")
	if err := os.WriteFile(path, ca.pem, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// inspectingProxy is an HTTP CONNECT proxy on loopback that inspects TLS:
// it answers each tunnel's TLS handshake with a certificate for the
// requested host issued by its CA, and relays what the client sends over
// its own TLS connection to upstream (every host is the fake origin),
// checking upstream's certificate against upstreamCAs as the host named.
type inspectingProxy struct {
	t           *testing.T
	ca          *companyCA
	upstream    string // host:port every CONNECT goes to
	upstreamCAs *x509.CertPool
	ln          net.Listener
	srv         *http.Server

	mu       sync.Mutex
	targets  []string // CONNECT targets, in order
	certs    map[string]*tls.Certificate
	conns    map[net.Conn]bool
	handlers sync.WaitGroup
	closed   bool
	// inspected counts tunnels whose client accepted the proxy's
	// certificate.
	inspected atomic.Int32
}

func startInspectingProxy(t *testing.T, ca *companyCA, upstream string, upstreamCAs *x509.CertPool) *inspectingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &inspectingProxy{t: t, ca: ca, upstream: upstream, upstreamCAs: upstreamCAs, ln: ln,
		certs: map[string]*tls.Certificate{}, conns: map[net.Conn]bool{}}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.connect), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		p.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		p.srv.Close()
		<-served
		p.mu.Lock()
		p.closed = true
		for c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.handlers.Wait()
	})
	return p
}

// URL is the proxy's URL, for HTTPS_PROXY.
func (p *inspectingProxy) URL() string { return "http://" + p.ln.Addr().String() }

// Targets returns the hosts clients asked tunnels to.
func (p *inspectingProxy) Targets() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.targets...)
}

// track registers c to be closed at the end; false when the proxy is
// closing.
func (p *inspectingProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = true
	return true
}

func (p *inspectingProxy) certFor(hello *tls.ClientHelloInfo, host string) (*tls.Certificate, error) {
	name := hello.ServerName
	if name == "" {
		name = host
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.certs[name]; ok {
		return c, nil
	}
	c, err := p.ca.leaf(name)
	if err != nil {
		return nil, err
	}
	p.certs[name] = c
	return c, nil
}

func (p *inspectingProxy) connect(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		http.Error(w, "this proxy only tunnels (CONNECT)", http.StatusMethodNotAllowed)
		return
	}
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	p.targets = append(p.targets, r.Host)
	p.mu.Unlock()
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	if !p.track(conn) {
		conn.Close()
		return
	}
	p.handlers.Add(1)
	defer p.handlers.Done()
	defer conn.Close()
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil || buf.Reader.Buffered() > 0 {
		return
	}
	conn.SetDeadline(time.Now().Add(2 * time.Minute))
	client := tls.Server(conn, &tls.Config{
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) { return p.certFor(hello, host) },
	})
	if err := client.Handshake(); err != nil {
		return // the client refused the company's certificate
	}
	p.inspected.Add(1)
	d := &net.Dialer{Timeout: 10 * time.Second}
	up, err := tls.DialWithDialer(d, "tcp", p.upstream, &tls.Config{RootCAs: p.upstreamCAs, ServerName: host})
	if err != nil {
		p.t.Logf("inspecting proxy: upstream %s for %s: %v", p.upstream, host, err)
		return
	}
	if !p.track(up) {
		up.Close()
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, client); up.CloseWrite(); done <- struct{}{} }()
	go func() { io.Copy(client, up); client.CloseWrite(); done <- struct{}{} }()
	<-done
	<-done
}

// egressHost is the origin's name: only the proxy knows where it is.
const egressHost = "registry.example.test"

// TestTerraformInitBehindInspectingProxy runs tfmirror behind a
// TLS-inspecting egress proxy whose CA is not in the system roots: the
// registry's answers come through the proxy, re-signed by the company CA;
// the release files come from a download host reached directly
// (NO_PROXY's loopback), signed by a CA of the system roots.
//
// Without origin_ca_file, the client gets 502 with a body naming the
// cause and the setting, the log says so once for the host, nothing is
// retried and the circuit breaker stays closed. With origin_ca_file naming
// the company CA (added to the system roots, which the download host
// still needs), terraform init succeeds through the proxy, and the lock
// file is a direct install's.
func TestTerraformInitBehindInspectingProxy(t *testing.T) {
	t.Parallel()
	tf := terraformBinary(t)
	bin := buildBinary(t)
	origin, err := fakeorigin.Start(fakeorigin.Options{Hostnames: []string{egressHost}, SeparateDownloadHost: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	origin.AddProvider("acme", "widget", []string{"0.1.0"}, registryPlatforms())
	systemRoots := originCAFile(t, origin) // the fake origin's CA stands for the system roots
	ca := newCompanyCA(t)
	egress := startInspectingProxy(t, ca, origin.Addr, origin.CertPool())
	env := []string{
		"PATH=" + os.Getenv("PATH"), "SSL_CERT_FILE=" + systemRoots,
		"HTTPS_PROXY=" + egress.URL(), "NO_PROXY=",
	}
	providers := map[string]string{"widget": egressHost + "/acme/widget@0.1.0"}
	e := &e2e{t: t, tf: tf, origin: origin}
	want, wantOut := directAs(t, e, egressHost).init(t, providers)
	origin.ResetHits()

	// Without the setting.
	data := filepath.Join(t.TempDir(), "data")
	p := startProcessEnv(t, bin, data, origin, env,
		"--allowed-origins", egressHost, "--origin-breaker-threshold", "1")
	through := registryRun{e: e, conf: hostBlockConf(t, egressHost, p.url+proxy.RegistryPath(egressHost)), caFile: filepath.Join(data, "tls", "ca.pem")}
	dir := writeConfig(t, providers)
	out, err := e.terraformWith(dir, through.conf, through.caFile, "init", "-no-color")
	if err == nil {
		t.Fatalf("terraform init succeeded through a proxy whose CA is not trusted:\n%s", out)
	}
	if !strings.Contains(out, "502") {
		t.Errorf("terraform's output does not show the 502:\n%s", out)
	}
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		body, resp, err := p.get(ctx, proxy.RegistryPath(egressHost)+"acme/widget/versions")
		cancel()
		if resp == nil || resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("request %d: %v, want 502", i, err)
		}
		for _, want := range []string{"signed by an unknown authority", "origin_ca_file", egressHost} {
			if !strings.Contains(string(body), want) {
				t.Errorf("request %d: the 502 body does not say %q: %s", i, want, body)
			}
		}
	}
	if n := p.count("origin TLS certificate not trusted; not retried, the circuit breaker ignores it"); n != 1 {
		t.Errorf("%d log records of the untrusted certificate, want 1 for the host", n)
	} else if l := p.logged("origin TLS certificate not trusted; not retried, the circuit breaker ignores it"); l["host"] != egressHost || !strings.Contains(l["error"].(string), "origin_ca_file") {
		t.Errorf("the log record names host %v and says %v", l["host"], l["error"])
	}
	for _, msg := range []string{"origin request failed; retrying", "origin keeps failing; circuit breaker opened, requests to it fail fast"} {
		if p.logged(msg) != nil {
			t.Errorf("logged %q for an untrusted certificate", msg)
		}
	}
	if egress.inspected.Load() != 0 || len(egress.Targets()) < 4 {
		t.Errorf("the proxy saw %d tunnels (%d accepted): want one per request, none accepted", len(egress.Targets()), egress.inspected.Load())
	}
	if n := origin.Hits(fakeorigin.Archive); n != 0 {
		t.Errorf("%d archive downloads without a trusted registry", n)
	}

	// With the setting, on a fresh data directory.
	data = filepath.Join(t.TempDir(), "data")
	p = startProcessEnv(t, bin, data, origin, env,
		"--allowed-origins", egressHost, "--origin-ca-file", ca.file(t))
	through = registryRun{e: e, conf: hostBlockConf(t, egressHost, p.url+proxy.RegistryPath(egressHost)), caFile: filepath.Join(data, "tls", "ca.pem")}
	got, gotOut := through.init(t, providers)
	checkSameInstall(t, "terraform init behind the inspecting proxy", want, got, wantOut, gotOut)
	if egress.inspected.Load() == 0 {
		t.Error("no tunnel through the inspecting proxy was accepted: the origin was not reached through it")
	}
	for _, target := range egress.Targets() {
		if target != egressHost+":443" {
			t.Errorf("the proxy was asked for %s: only the registry goes through it", target)
		}
	}
	if n := origin.Hits(fakeorigin.Archive); n != 1 {
		t.Errorf("%d archive downloads from the download host, want 1", n)
	}
}
