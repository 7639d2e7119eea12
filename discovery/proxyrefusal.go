package discovery

// An upstream proxy's refusals: an HTTP proxy's answer to CONNECT other
// than 200 is made a *ProxyError by the *http.Transport's
// OnProxyConnectResponse; a SOCKS5 proxy's refusals and its breaks of
// the protocol, which net/http reports as a *net.OpError of no type of
// its own, by refusalTransport, below the trust of trust.go, which logs
// the refusals that are the operator's to fix once per host.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
)

// socksError returns the *ProxyError err tells of when it is net/http's
// report of a SOCKS5 proxy's failure in the handshake (an error of its
// SOCKS5 dialer, which names its operation "socks connect"): a refusal
// of the mirror's credentials or of the connection to the host (a reply
// other than "succeeded"), or a break of the protocol (an answer that is
// not SOCKS5, the connection closed or failed in the handshake). A
// timeout is not one: the proxy waits for the host before it replies,
// and a slow host is the host's. Nor is any error before the handshake
// (the proxy cannot be reached).
func socksError(err error) (*ProxyError, bool) {
	var op *net.OpError
	if !errors.As(err, &op) || !strings.HasPrefix(op.Op, "socks ") || op.Err == nil {
		return nil, false
	}
	var ne net.Error
	if errors.Is(op.Err, context.Canceled) || errors.Is(op.Err, context.DeadlineExceeded) ||
		(errors.As(op.Err, &ne) && ne.Timeout()) {
		return nil, false
	}
	pe := &ProxyError{}
	if op.Addr != nil {
		pe.Target = op.Addr.String()
	}
	var conn *net.OpError
	words := op.Err.Error()
	switch {
	case words == SOCKSAuthFailed, words == SOCKSNoAcceptableAuth, words == socksBadCredentials:
		pe.SOCKS = words
	case strings.HasPrefix(words, "unknown error "):
		// net/http's words for a reply other than "succeeded".
		pe.SOCKS = strings.TrimPrefix(words, "unknown error ")
	case errors.Is(op.Err, io.EOF), errors.Is(op.Err, io.ErrUnexpectedEOF):
		pe.Broken = "it closed the connection in the handshake"
	case errors.As(op.Err, &conn):
		// Not its own words, which name the proxy's address.
		pe.Broken = "the connection failed in the handshake"
		if conn.Err != nil {
			pe.Broken += ": " + conn.Err.Error()
		}
	default:
		// The SOCKS5 dialer's own words ("unexpected protocol version
		// 72"), which name no address.
		pe.Broken = words
	}
	return pe, true
}

// refusalTransport turns a SOCKS5 proxy's refusals and breaks of the
// protocol into *ProxyError and logs each host's refusal that is the
// operator's to fix (credentials, the proxy's policy) once, again after
// a request to the host got through. The log names the proxy by its
// settings, never its address or credentials.
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
	pe, ok := socksError(err)
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
