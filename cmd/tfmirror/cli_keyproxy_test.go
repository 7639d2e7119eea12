package main

// keyProxy: the internet hosts an installer fetches its publisher's key
// from, for tests. Some installers (tfswitch) download the key that
// checks the release files from a fixed https URL on the publisher's
// site, not from the mirror. The test points them at keyProxy with
// HTTPS_PROXY: a proxy on loopback that answers CONNECT for those hosts
// itself, terminating TLS with a certificate of its own CA (trusted
// through SSL_CERT_FILE) and serving the stand-in publisher's key; it
// refuses every other host. Go programs never send loopback addresses to
// a proxy, so the mirror itself is reached directly.

import (
	"bufio"
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/certs"
)

type keyProxy struct {
	// URL is "http://127.0.0.1:PORT", for HTTPS_PROXY.
	URL string
	// CAFile is the PEM of the CA of the hosts it answers for.
	CAFile string

	files map[string][]byte // by "host/path"
	outer *http.Server
	inner *http.Server
	conns *connListener

	mu   sync.Mutex
	hits map[string]int // by "host/path", and "CONNECT host" for each tunnel
}

// startKeyProxy serves files ("host/path" to body) through CONNECT to
// their hosts on port 443. It stops when the test ends.
func startKeyProxy(t *testing.T, files map[string][]byte) *keyProxy {
	t.Helper()
	hosts := map[string]bool{}
	for k := range files {
		host, _, _ := strings.Cut(k, "/")
		hosts[host] = true
	}
	names := make([]string, 0, len(hosts))
	for h := range hosts {
		names = append(names, h)
	}
	f, err := certs.Ensure(filepath.Join(t.TempDir(), "proxy-ca"), names, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	p := &keyProxy{CAFile: f.CA, files: files, hits: map[string]int{}, conns: newConnListener()}
	p.inner = &http.Server{Handler: http.HandlerFunc(p.serveFile), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: log.New(io.Discard, "", 0)}
	p.outer = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.connect(w, r, hosts, &cert) }),
		ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.URL = "http://" + ln.Addr().String()
	var wg sync.WaitGroup
	wg.Go(func() { p.outer.Serve(ln) })      //nolint:errcheck // ErrServerClosed
	wg.Go(func() { p.inner.Serve(p.conns) }) //nolint:errcheck // ErrServerClosed
	t.Cleanup(func() {
		p.outer.Close()
		p.inner.Close()
		wg.Wait()
	})
	return p
}

// connect answers CONNECT host:443 for a host it serves: the tunnel's
// TLS is ended here and its requests served by inner.
func (p *keyProxy) connect(w http.ResponseWriter, r *http.Request, hosts map[string]bool, cert *tls.Certificate) {
	host, port, err := net.SplitHostPort(r.Host)
	p.mu.Lock()
	p.hits["CONNECT "+r.Host]++
	p.mu.Unlock()
	if r.Method != http.MethodConnect || err != nil || port != "443" || !hosts[host] {
		http.Error(w, "this proxy answers CONNECT for its own hosts only", http.StatusForbidden)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "no hijacking", http.StatusInternalServerError)
		return
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	conn.SetDeadline(time.Now().Add(30 * time.Second)) //nolint:errcheck
	if _, err := conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		conn.Close()
		return
	}
	tc := tls.Server(&bufferedConn{Conn: conn, r: buf.Reader}, &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12})
	if !p.conns.push(tc) {
		tc.Close()
	}
}

func (p *keyProxy) serveFile(w http.ResponseWriter, r *http.Request) {
	k := r.Host + r.URL.Path
	p.mu.Lock()
	p.hits[k]++
	p.mu.Unlock()
	body, ok := p.files[k]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Write(body) //nolint:errcheck
}

// Hits is how often "host/path" was asked for (or, as "CONNECT
// host:port", a tunnel).
func (p *keyProxy) Hits(k string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits[k]
}

// bufferedConn reads first what the CONNECT request's reader buffered.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// connListener hands the tunnels' connections to inner.
type connListener struct {
	ch     chan net.Conn
	done   chan struct{}
	closed sync.Once
}

func newConnListener() *connListener {
	return &connListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *connListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error { l.closed.Do(func() { close(l.done) }); return nil }
func (l *connListener) Addr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}
}

// caBundle writes the PEM files into one, for SSL_CERT_FILE.
func caBundle(t *testing.T, files ...string) string {
	t.Helper()
	var all []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(append(all, b...), '\n')
	}
	p := filepath.Join(t.TempDir(), "ca-bundle.pem")
	if err := os.WriteFile(p, all, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
