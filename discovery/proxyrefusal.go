package discovery

// An upstream proxy's refusals and failures: an HTTP proxy's answer to
// CONNECT other than 200 is made a *ProxyError by the *http.Transport's
// OnProxyConnectResponse; a SOCKS5 proxy's refusals and its breaks of
// the protocol, which net/http reports as a *net.OpError of no type of
// its own, an HTTP proxy's break of the protocol in its answer to
// CONNECT, and a proxy that cannot be reached, which net/http reports in
// words that name its address, by refusalTransport, below the trust of
// trust.go, which logs the refusals that are the operator's to fix, and
// the proxy not reached, once per host.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// proxyStall is what a read or a write of a connection to the upstream
// proxy gets once the deadline of its handshake (SOCKS5) or of its
// answer to CONNECT (HTTP) has passed (proxyConn.bound): a timeout, in
// words that name no address.
type proxyStall struct {
	// hostAsked: the proxy had been asked for the host, and was
	// connecting to it.
	hostAsked bool
	limit     time.Duration
}

func (e *proxyStall) Error() string {
	if e.hostAsked {
		return fmt.Sprintf("the connection to the host through the upstream proxy was not opened within %s", e.limit)
	}
	return fmt.Sprintf("the upstream proxy did not answer within %s", e.limit)
}
func (e *proxyStall) Timeout() bool   { return true }
func (e *proxyStall) Temporary() bool { return true }

// socksError returns the *ProxyError err tells of when it is net/http's
// report of a SOCKS5 proxy's failure in the handshake (an error of its
// SOCKS5 dialer, which names its operation "socks connect"): a refusal
// of the mirror's credentials or of the connection to the host (a reply
// other than "succeeded"), or a break of the protocol (an answer that is
// not SOCKS5, the connection closed or failed in the handshake). A
// timeout is not one: the proxy waits for the host before it replies,
// and a slow host is the host's (proxyHostTimeout); a proxy silent
// before it was asked for the host does not answer, as one not reached
// (proxyUnreachable). Nor is any error before the handshake (the proxy
// cannot be reached: proxyUnreachable).
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

// proxyHostTimeout is the *proxyStall err tells of when it is net/http's
// report of a SOCKS5 handshake, or an HTTP proxy's answer to CONNECT,
// whose deadline passed once the proxy was asked for the host: the
// host's timeout, as a dial's is, since the proxy connects to it before
// it replies; its words name no address, where its SOCKS5 dialer's
// error names the proxy's.
func proxyHostTimeout(err error) (*proxyStall, bool) {
	var stall *proxyStall
	if !errors.As(err, &stall) || !stall.hostAsked {
		return nil, false
	}
	return stall, true
}

// proxyUnreachable returns the *ProxyError err tells of when it is
// net/http's report that the connection to the proxy itself failed (a
// *net.OpError "proxyconnect"), whose words name the proxy's address:
// nothing listens there, its name does not resolve, it does not answer,
// or the TLS of an https:// proxy failed; or that a SOCKS5 proxy took
// the connection and did not answer its handshake in time, before it
// was asked for the host (an overloaded proxy whose system takes
// connections its program does not serve): it does not answer either.
// A certificate of the proxy's the mirror does not trust is not one
// (trustTransport's), nor the caller's cancellation.
func proxyUnreachable(req *http.Request, err error) (*ProxyError, bool) {
	var stall *proxyStall
	if errors.As(err, &stall) && !stall.hostAsked {
		return &ProxyError{Target: targetAddr(req.URL), Unreachable: "it did not answer in time", Err: err}, true
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "proxyconnect" || errors.Is(err, context.Canceled) {
		return nil, false
	}
	if _, cert := certificateCause(err); cert {
		return nil, false
	}
	pe := &ProxyError{Target: targetAddr(req.URL), Err: err}
	var dnsErr *net.DNSError
	var sysErr *os.SyscallError
	var ne net.Error
	switch {
	case errors.As(err, &dnsErr):
		pe.Unreachable = "its host name does not resolve"
	case errors.As(err, &ne) && ne.Timeout():
		pe.Unreachable = "it did not answer in time"
	case errors.As(err, &sysErr):
		// The system's words ("connection refused", "no route to
		// host"), which name no address.
		pe.Unreachable = sysErr.Err.Error()
	default:
		pe.Unreachable = "the connection to it failed"
	}
	return pe, true
}

// connectBroken returns the *ProxyError err tells of when an HTTP proxy
// asked with CONNECT failed before it answered in HTTP: its answer is not
// an HTTP response, or it closed or broke the connection (net/http
// reports these in errors of no type of their own, which read as the
// origin's). The request's proxyChoice tells it: the connection to the
// proxy was opened, its answer not read, and the request was given no
// connection. What fails once the proxy answered (a tunnel it opened,
// through which the origin answers what is not TLS), or on a connection
// the request was given while its own dial still waited for the proxy's
// answer (another request's, idle, or HTTP/2's shared one), is the
// origin's. A timeout is not one: the proxy connects to the host before
// it answers, and a slow host is the host's (proxyHostTimeout).
func connectBroken(req *http.Request, err error) (*ProxyError, bool) {
	pc := choiceOf(req.Context())
	if pc == nil || !pc.connect.Load() || !pc.dialed.Load() || pc.answered.Load() || pc.got.Load() {
		return nil, false
	}
	var op *net.OpError
	var ne net.Error
	if (errors.As(err, &op) && op.Op == "proxyconnect") || req.Context().Err() != nil ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout()) {
		return nil, false
	}
	pe := &ProxyError{Target: targetAddr(req.URL), Connect: true}
	var sysErr *os.SyscallError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		pe.Broken = "it closed the connection before it answered"
	case errors.As(err, &sysErr):
		pe.Broken = "the connection failed before it answered: " + sysErr.Error()
	default:
		// Not net/http's words, which quote the proxy's answer.
		pe.Broken = "its answer to CONNECT is not an HTTP response"
	}
	return pe, true
}

// targetAddr is u's host and port, as the proxy is asked for them.
func targetAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "443"
	}
	return net.JoinHostPort(targetName(u.Hostname()), port)
}

// refusalTransport turns a SOCKS5 proxy's refusals and breaks of the
// protocol, an HTTP proxy's break of the protocol in its answer to
// CONNECT and a proxy that cannot be reached into *ProxyError, and a
// proxy's connection to the host not made in time (SOCKS5, or HTTP
// asked with CONNECT) into a timeout that names no address
// (proxyHostTimeout). It logs
// each host's refusal that is the operator's to fix (credentials, the
// proxy's policy) once, and each host's proxy not reached once, again
// after a request to the host got through. The log names the proxy by
// its settings, never its credentials; only the line of a proxy not
// reached has net/http's words, which name its address.
type refusalTransport struct {
	next      http.RoundTripper
	log       *slog.Logger
	logged    loggedHosts
	unreached loggedHosts
}

func (t *refusalTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	host := hostKey(req.URL)
	resp, err := t.next.RoundTrip(req)
	if err == nil {
		t.logged.succeeded(host)
		t.unreached.succeeded(host)
		return resp, nil
	}
	if stall, ok := proxyHostTimeout(err); ok {
		return nil, stall
	}
	pe, ok := socksError(err)
	if !ok {
		pe, ok = proxyUnreachable(req, err)
	}
	if !ok {
		pe, ok = connectBroken(req, err)
	}
	if ok {
		err = pe
	} else if !errors.As(err, &pe) {
		return nil, err
	}
	switch {
	case pe.operatorsToFix():
		if t.logged.first(host) {
			t.log.Error("the upstream proxy refused the connection; not retried, the circuit breaker ignores it",
				"host", host, "answer", pe.Status(), "error", pe.Error())
		}
	case pe.Unreachable != "":
		if t.unreached.first(host) {
			t.log.Error("the upstream proxy could not be reached; retried, and counted toward the circuit breaker, as the network down",
				"host", host, "error", pe.Err)
		}
	}
	return nil, err
}
