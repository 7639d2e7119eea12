package httpserve

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// handshakes records the reasons ErrorLog tells, and the lines it wrote.
type handshakes struct {
	mu      sync.Mutex
	reasons []string
	log     bytes.Buffer
	changed chan struct{}
}

func (h *handshakes) failed(reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reasons = append(h.reasons, reason)
	close(h.changed)
	h.changed = make(chan struct{})
}

func (h *handshakes) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.log.Write(p)
}

// next waits for the next reason told.
func (h *handshakes) next(t *testing.T, seen int) string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		h.mu.Lock()
		if len(h.reasons) > seen {
			r := h.reasons[seen]
			h.mu.Unlock()
			return r
		}
		changed := h.changed
		h.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no failed handshake told after %d", seen)
		}
	}
}

// TestErrorLogTellsFailedHandshakes: a server whose ErrorLog is ErrorLog's
// tells each TLS handshake that failed by its reason: a client that
// does not trust the server's certificate, one that speaks plain HTTP
// to the TLS port, one that goes away in the middle; and still writes
// every line of its own errors. A handshake that succeeds tells nothing.
func TestErrorLogTellsFailedHandshakes(t *testing.T) {
	t.Parallel()
	certs := httptest.NewTLSServer(http.NotFoundHandler())
	cert := certs.TLS.Certificates
	roots := x509.NewCertPool()
	roots.AddCert(certs.Certificate())
	certs.Close()

	h := &handshakes{changed: make(chan struct{})}
	srv := New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }), ErrorLog(h, h.failed))
	srv.TLSConfig = &tls.Config{Certificates: cert}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	url := "https://" + ln.Addr().String() + "/"

	// A client that trusts the certificate: nothing told.
	trusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	resp, err := trusting.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	// One that does not: Go's client sends "bad certificate".
	untrusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: x509.NewCertPool()}}}
	if _, err := untrusting.Get(url); err == nil {
		t.Fatal("a client trusting no CA was served")
	}
	if got := h.next(t, 0); got != HandshakeCertificateRefused {
		t.Errorf("a client refusing the certificate: %q, want %q", got, HandshakeCertificateRefused)
	}
	// One whose own check of the certificate refuses it.
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true, VerifyConnection: func(tls.ConnectionState) error {
		return x509.UnknownAuthorityError{}
	}})
	if err == nil {
		c.Close()
		t.Fatal("a client refusing the certificate connected")
	}
	if got := h.next(t, 1); got != HandshakeCertificateRefused {
		t.Errorf("a client whose check refuses the certificate: %q, want %q", got, HandshakeCertificateRefused)
	}

	// Plain HTTP on the TLS port.
	resp, err = http.Get("http://" + ln.Addr().String() + "/")
	if err == nil {
		resp.Body.Close()
	}
	if got := h.next(t, 2); got != HandshakeNotTLS {
		t.Errorf("plain HTTP: %q, want %q", got, HandshakeNotTLS)
	}

	// A client that starts a handshake and goes away.
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	raw.Write([]byte{0x16, 0x03, 0x01, 0x00, 0x40})
	raw.Close()
	if got := h.next(t, 3); got != HandshakeOther {
		t.Errorf("a client gone in the middle: %q, want %q", got, HandshakeOther)
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	if n := strings.Count(h.log.String(), "http: TLS handshake error from "); n != 4 || len(h.reasons) != 4 {
		t.Errorf("%d lines written and %d reasons told, want 4 of each:\n%s", n, len(h.reasons), h.log.String())
	}
}

// TestHandshakeReasons: the lines net/http writes for the alerts other
// clients send (OpenSSL's, curl's, name the cause) are told as Go's are.
func TestHandshakeReasons(t *testing.T) {
	for line, want := range map[string]string{
		"http: TLS handshake error from 10.0.0.1:5000: remote error: tls: unknown certificate authority":     HandshakeCertificateRefused,
		"http: TLS handshake error from 10.0.0.1:5000: remote error: tls: bad certificate":                   HandshakeCertificateRefused,
		"http: TLS handshake error from 10.0.0.1:5000: remote error: tls: expired certificate":               HandshakeCertificateRefused,
		"http: TLS handshake error from 10.0.0.1:5000: remote error: tls: unknown certificate":               HandshakeCertificateRefused,
		"http: TLS handshake error from 10.0.0.1:5000: local error: tls: bad record MAC":                     HandshakeCertificateRefused,
		"http: TLS handshake error from 10.0.0.1:5000: client sent an HTTP request to an HTTPS server":       HandshakeNotTLS,
		"http: TLS handshake error from 10.0.0.1:5000: tls: first record does not look like a TLS handshake": HandshakeNotTLS,
		"http: TLS handshake error from 10.0.0.1:5000: EOF":                                                  HandshakeOther,
		"http: TLS handshake error from 10.0.0.1:5000: remote error: tls: protocol version not supported":    HandshakeOther,
	} {
		if got := handshakeReason([]byte(line)); got != want {
			t.Errorf("%s: %q, want %q", line, got, want)
		}
	}
}
