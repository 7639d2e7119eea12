package discovery

// An upstream proxy's refusals: an HTTP proxy's answer to CONNECT other
// than 200 is made a *ProxyError by the *http.Transport's
// OnProxyConnectResponse; a SOCKS5 proxy's, which net/http reports as a
// *net.OpError of no type of its own, by refusalTransport, below the
// trust of trust.go, which logs the refusals that are the operator's to
// fix once per host.

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
)

// socksRefusal returns the *ProxyError err tells of when it is net/http's
// report of a SOCKS5 proxy's refusal: of the mirror's credentials, or of
// the connection to the host (a reply other than "succeeded"). Any other
// error (the proxy cannot be reached, it breaks the protocol) is not one.
func socksRefusal(err error) (*ProxyError, bool) {
	var op *net.OpError
	if !errors.As(err, &op) || !strings.HasPrefix(op.Op, "socks ") || op.Err == nil {
		return nil, false
	}
	words := op.Err.Error()
	switch {
	case words == SOCKSAuthFailed, words == SOCKSNoAcceptableAuth, words == socksBadCredentials:
	case strings.HasPrefix(words, "unknown error "):
		// net/http's words for a reply other than "succeeded".
		words = strings.TrimPrefix(words, "unknown error ")
	default:
		return nil, false
	}
	pe := &ProxyError{SOCKS: words}
	if op.Addr != nil {
		pe.Target = op.Addr.String()
	}
	return pe, true
}

// refusalTransport turns a SOCKS5 proxy's refusals into *ProxyError and
// logs each host's refusal that is the operator's to fix (credentials,
// the proxy's policy) once, again after a request to the host got
// through. The log names the proxy by its settings, never its address
// or credentials.
type refusalTransport struct {
	next   http.RoundTripper
	log    *slog.Logger
	logged loggedHosts
}

func (t *refusalTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	host := hostKey(req.URL)
	resp, err := t.next.RoundTrip(req)
	if err == nil {
		t.logged.succeeded(host)
		return resp, nil
	}
	pe, ok := socksRefusal(err)
	if ok {
		err = pe
	} else if !errors.As(err, &pe) {
		return nil, err
	}
	if !pe.operatorsToFix() {
		return nil, err
	}
	if t.logged.first(host) {
		t.log.Error("the upstream proxy refused the connection; not retried, the circuit breaker ignores it",
			"host", host, "answer", pe.Status(), "error", pe.Error())
	}
	return nil, err
}
