package discovery

// The TLS trust of origin connections: a certificate no trusted CA signs,
// that names another host or that is out of its validity period is the
// operator's to fix (a CA to add, a proxy to configure), not an outage.
// trustTransport, below the policy of transport.go and above the guarded
// *http.Transport, turns such failures into *CertificateError for every
// request (registries, downloads, module sources), and logs each host's
// once.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
)

// ErrUntrustedCertificate matches a *CertificateError: an origin, download
// or source host presented a certificate the client does not trust. It is
// never retried and does not count toward the circuit breaker.
var ErrUntrustedCertificate = errors.New("TLS certificate not trusted")

// CertificateError is a TLS certificate the client refused. It is returned
// wrapped in an *OriginError.
type CertificateError struct {
	// Host is the host contacted, as in the request's URL.
	Host string
	// Proxy says the certificate refused is the upstream proxy's own (an
	// https:// proxy URL): the request never reached Host. The proxy is
	// named by its settings, never by its address: Error leaves out the
	// verification's words (Err), which for a certificate issued for
	// another name give the proxy's host name or address and the names
	// of its certificate.
	Proxy bool
	// Cause says why, in words: "signed by an unknown authority", "not
	// valid for this host name", "expired or not yet valid", or "invalid".
	Cause string
	// Hint is Config.TrustHint: what the operator can do.
	Hint string
	// Err is the verification error.
	Err error
}

func (e *CertificateError) Error() string {
	var msg string
	if e.Proxy {
		msg = fmt.Sprintf("the TLS certificate of %s on the way to %s is not trusted: %s", UpstreamProxyNamed, e.Host, e.Cause)
	} else {
		msg = fmt.Sprintf("the TLS certificate of %s is not trusted: %s (%v)", e.Host, e.Cause, e.Err)
	}
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

func (e *CertificateError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUntrustedCertificate) true.
func (e *CertificateError) Is(target error) bool { return target == ErrUntrustedCertificate }

// certificateCause classifies err as a certificate verification failure,
// with its cause in words; ok is false for any other error.
func certificateCause(err error) (cause string, ok bool) {
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	switch {
	case errors.As(err, &unknown):
		return "signed by an unknown authority", true
	case errors.As(err, &hostname):
		return "not valid for this host name", true
	case errors.As(err, &invalid):
		if invalid.Reason == x509.Expired {
			return "expired or not yet valid", true
		}
		return "invalid", true
	case errors.As(err, &verify):
		return "invalid", true
	}
	return "", false
}

// maxHostsLogged bounds the hosts a loggedHosts remembers: past it the
// memory starts afresh (and a host may be logged again).
const maxHostsLogged = 256

// loggedHosts remembers the hosts whose failure was logged, so that each
// host's is logged once, and again after a request to it got through.
// The zero value is ready to use.
type loggedHosts struct {
	mu     sync.Mutex
	logged map[string]bool
}

// succeeded forgets host: its next failure is logged.
func (l *loggedHosts) succeeded(host string) {
	l.mu.Lock()
	delete(l.logged, host)
	l.mu.Unlock()
}

// first reports whether host's failure is to be logged (the first since
// it was remembered), and remembers it.
func (l *loggedHosts) first(host string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.logged[host] {
		return false
	}
	if l.logged == nil || len(l.logged) >= maxHostsLogged {
		l.logged = make(map[string]bool)
	}
	l.logged[host] = true
	return true
}

// trustTransport turns certificate failures into *CertificateError and
// logs each host's once (again after a success of that host).
type trustTransport struct {
	next   http.RoundTripper
	log    *slog.Logger
	hint   string
	logged loggedHosts
}

func (t *trustTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	host := hostKey(req.URL)
	resp, err := t.next.RoundTrip(req)
	if err == nil {
		t.logged.succeeded(host)
		return resp, nil
	}
	cause, ok := certificateCause(err)
	if !ok {
		return nil, err
	}
	var op *net.OpError
	proxied := errors.As(err, &op) && op.Op == "proxyconnect"
	ce := &CertificateError{Host: host, Proxy: proxied, Cause: cause, Hint: t.hint, Err: err}
	if t.logged.first(host) {
		// The verification's words too, for the operator: for the
		// proxy's certificate, the client's answer has not them.
		logged := ce.Error()
		if proxied {
			logged += " (" + err.Error() + ")"
		}
		t.log.Error("origin TLS certificate not trusted; not retried, the circuit breaker ignores it",
			"host", host, "cause", cause, "error", logged)
	}
	return nil, ce
}
