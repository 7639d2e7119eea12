package discovery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/tfmirror/tfmirror/v2/internal/logbound"
)

var (
	// ErrNotFound means the origin explicitly answered 404 for the provider,
	// version or platform asked about. It is returned wrapped with detail.
	ErrNotFound = errors.New("not found at origin")

	// ErrNoProviderService means the host's service discovery document has
	// no providers.v1 service (or the host has no discovery document at
	// all): it is not a provider registry.
	ErrNoProviderService = errors.New("host does not provide a provider registry (no providers.v1 service)")

	// ErrHostNotAllowed means the origin host of a provider or module is
	// not one of Config.AllowedOrigins (the client's, or the engine's in
	// package mirror, which returns it too): nothing was looked up or
	// sent. It is returned wrapped with the host's name.
	// Its text names the setting that allows a host.
	ErrHostNotAllowed = errors.New("origin host is not allowed (not among allowed_origins, --allowed-origins)")

	// ErrPrivateAddress means a connection was refused because the address
	// it would go to is not a public unicast address (see IsPublicAddr). It
	// is returned wrapped in an *OriginError.
	// Its text names the setting that allows them.
	ErrPrivateAddress = errors.New("refusing to connect to a non-public address (allow_private_origins, --allow-private-origins, allows it)")

	// ErrTooLarge means a response body was larger than the limit for its
	// kind. It is returned wrapped in an *OriginError.
	ErrTooLarge = errors.New("response too large")
)

// maxArchiveSetting sets Config.MaxArchiveBytes, the bound on an
// archive's download and on each response of a module source host: an
// error over it names it, for the operator to know what to raise.
const maxArchiveSetting = "--max-archive-bytes"

// UpstreamProxyNamed names the upstream proxy in errors and on the status
// page: by the settings that choose it, never by its address, which its
// URL may give with a password.
const UpstreamProxyNamed = "the upstream proxy (upstream_proxy, --upstream-proxy, or HTTPS_PROXY)"

// ErrProxyRefused matches a *ProxyError: the upstream proxy refused to
// open a connection to a host (an HTTP proxy's answer to CONNECT other
// than 200, a SOCKS5 proxy's refusal), broke its protocol, or could not
// be reached.
var ErrProxyRefused = errors.New("the upstream proxy refused the connection")

// The words of a SOCKS5 proxy's refusals that are the operator's to fix
// (ProxyError.SOCKS): net/http's, which reports them as errors of no
// type of their own.
const (
	// SOCKSAuthFailed: the proxy refused the user and password.
	SOCKSAuthFailed = "username/password authentication failed"
	// SOCKSNoAcceptableAuth: the proxy takes none of the authentication
	// methods the mirror offers (it asks for a user and password the
	// proxy's URL does not give, or for a method the mirror does not
	// have).
	SOCKSNoAcceptableAuth = "no acceptable authentication methods"
	// SOCKSNotAllowed: the proxy's rules refuse the connection to the
	// host (reply 0x02).
	SOCKSNotAllowed = "connection not allowed by ruleset"

	// socksBadCredentials: the proxy's URL gives a user and password
	// the method cannot carry (no user, or one over 255 bytes).
	socksBadCredentials = "invalid username/password"
)

// ProxyError is an upstream proxy's refusal to open a connection to a
// host, its failure to keep to its protocol (SOCKS5, or HTTP in its
// answer to CONNECT), or the failure to reach the proxy itself: no
// request reached the host. It is returned wrapped in an *OriginError.
// It names the settings that choose the proxy, never the proxy's address
// or credentials. A refusal of the mirror's credentials (an HTTP proxy's
// 407, a SOCKS5 proxy's failed authentication) or of the host by the
// proxy's policy (an HTTP proxy's 403, a SOCKS5 proxy's "connection not
// allowed by ruleset") is the operator's to fix, not an outage: it is
// never retried and does not count toward the circuit breaker. A broken
// protocol (an answer that is not SOCKS5, or not HTTP to CONNECT; the
// connection closed before the proxy answered) is the proxy's failure,
// not the host's: it is retried, as a connection failure is, but does
// not count toward the circuit breaker either. A proxy that cannot be
// reached (nothing listens at its address, its name does not resolve,
// it does not answer) is the proxy's failure too, and retried, but
// counts toward the circuit breaker of every host behind it, as the
// network down would: the mirror answers from what it holds at once
// meanwhile. Any other refusal (the proxy could not reach the host)
// is an origin failure like any other. ProxyFault tells the proxy's own
// from the host's.
type ProxyError struct {
	// Target is the host:port the proxy was asked for.
	Target string
	// StatusCode is an HTTP proxy's answer to CONNECT; 0 for a SOCKS5
	// proxy.
	StatusCode int
	// SOCKS is a SOCKS5 proxy's refusal in the protocol's words (one of
	// the SOCKS* constants, or a reply to the connection request such
	// as "host unreachable"); "" for an HTTP proxy and for a broken
	// protocol.
	SOCKS string
	// Broken says how the proxy broke its protocol: a SOCKS5 proxy, in
	// net/http's words ("unexpected protocol version 72", "EOF"); an
	// HTTP proxy asked with CONNECT (Connect), in the mirror's ("its
	// answer to CONNECT is not an HTTP response"); "" for a refusal.
	Broken string
	// Connect says Broken is an HTTP proxy's, in its answer to CONNECT,
	// not a SOCKS5 proxy's.
	Connect bool
	// Unreachable says why the proxy itself could not be reached
	// ("connection refused", "its host name does not resolve"); "" when
	// it was.
	Unreachable string
	// Err is net/http's error for an unreachable proxy, which names the
	// proxy's address (never the credentials of its URL): for the
	// operator's log, never in Error's words.
	Err error
}

func (e *ProxyError) Error() string {
	switch {
	case e.Unreachable != "":
		return fmt.Sprintf("%s could not be reached on the way to %s (%s)", UpstreamProxyNamed, e.Target, e.Unreachable)
	case e.Broken != "" && e.Connect:
		return fmt.Sprintf("%s broke the HTTP protocol on the CONNECT to %s (%s): it is not an HTTP proxy, or it failed", UpstreamProxyNamed, e.Target, e.Broken)
	case e.Broken != "":
		return fmt.Sprintf("%s broke the SOCKS5 protocol on the connection to %s (%s): it is not a SOCKS5 proxy, or it failed", UpstreamProxyNamed, e.Target, e.Broken)
	}
	msg := fmt.Sprintf("%s answered %s to CONNECT %s", UpstreamProxyNamed, e.Status(), e.Target)
	if e.SOCKS != "" {
		msg = fmt.Sprintf("%s refused the SOCKS5 connection to %s (%s)", UpstreamProxyNamed, e.Target, e.SOCKS)
	}
	switch {
	case e.Credentials():
		return msg + ": it refuses the mirror's credentials (the user and password of the proxy's URL)"
	case e.Policy():
		return msg + ": its policy does not let the mirror connect to this host"
	}
	return msg + ": it did not open a tunnel to the host"
}

// Status is the proxy's answer: an HTTP proxy's as a status line says it
// ("407 Proxy Authentication Required"; the code alone when net/http has
// no text for it), a SOCKS5 proxy's as "SOCKS5 " and its words, a
// broken protocol as "SOCKS5 protocol broken: " (or "HTTP protocol
// broken: ") and how, an unreachable proxy as "unreachable: " and why.
func (e *ProxyError) Status() string {
	switch {
	case e.Unreachable != "":
		return "unreachable: " + e.Unreachable
	case e.Broken != "" && e.Connect:
		return "HTTP protocol broken: " + e.Broken
	case e.Broken != "":
		return "SOCKS5 protocol broken: " + e.Broken
	case e.SOCKS != "":
		return "SOCKS5 " + e.SOCKS
	}
	return strings.TrimSpace(fmt.Sprintf("%d %s", e.StatusCode, http.StatusText(e.StatusCode)))
}

// Credentials reports whether the proxy refused the mirror's credentials
// (the user and password of the proxy's URL, or none given where the
// proxy wants them).
func (e *ProxyError) Credentials() bool {
	switch {
	case e.Broken != "":
		return false
	case e.SOCKS != "":
		return e.SOCKS == SOCKSAuthFailed || e.SOCKS == SOCKSNoAcceptableAuth || e.SOCKS == socksBadCredentials
	}
	return e.StatusCode == http.StatusProxyAuthRequired
}

// Policy reports whether the proxy's policy refused the host.
func (e *ProxyError) Policy() bool {
	switch {
	case e.Broken != "":
		return false
	case e.SOCKS != "":
		return e.SOCKS == SOCKSNotAllowed
	}
	return e.StatusCode == http.StatusForbidden
}

// ProxyFault reports whether the failure is the proxy's, not the host's:
// its refusal of the mirror's credentials or of the host by its policy,
// a broken protocol, or the proxy not reached. Outcome calls it
// "proxy", and but for the proxy not reached (Unreachable) it does not
// count toward the host's circuit breaker; a refusal that is not the
// proxy's (it could not reach the host) is an origin failure.
func (e *ProxyError) ProxyFault() bool {
	return e.operatorsToFix() || e.Broken != "" || e.Unreachable != ""
}

// Is makes errors.Is(err, ErrProxyRefused) true.
func (e *ProxyError) Is(target error) bool { return target == ErrProxyRefused }

// Unwrap is Err, so that an unreachable proxy's timeout stays a timeout
// (OriginError.Timeout).
func (e *ProxyError) Unwrap() error { return e.Err }

// operatorsToFix reports whether the refusal is the operator's to fix
// (credentials, the proxy's policy) rather than a failure of the host.
func (e *ProxyError) operatorsToFix() bool { return e.Credentials() || e.Policy() }

// Operations named in OriginError.Op.
const (
	OpDiscovery = "discovery"
	OpVersions  = "versions"
	OpPackage   = "package"
	OpShasums   = "shasums"
	OpSignature = "signature"
	OpDocument  = "document" // FetchDocument or FetchFile of a URL that is neither SHA256SUMS nor a signature
	OpArchive   = "archive"
	// OpArchiveSize learns an archive's size from its first byte (ArchiveSize).
	OpArchiveSize = "archive_size"

	OpModuleVersions = "module_versions" // a registry module's versions list
	OpModuleLocation = "module_location" // a registry module version's download location
	OpModuleSource   = "module_source"   // a module package from its source host (Git or archive)
)

// OriginError is a failure to get a usable answer from an origin: a
// connection or TLS failure, a timeout, an unexpected status, or a malformed
// response.
type OriginError struct {
	// Host is the provider's origin host, in svchost comparison form.
	Host string
	// Op is the operation that failed: one of the Op* constants.
	Op string
	// DownloadHost is the host actually contacted for a download when it is
	// not Host (a release CDN, for example); empty otherwise.
	DownloadHost string
	// StatusCode is the HTTP status the origin answered with, 0 if the
	// failure was not an unexpected status.
	StatusCode int
	// Err says what went wrong.
	Err error
}

func (e *OriginError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "origin %s: %s", e.Host, e.Op)
	if e.DownloadHost != "" {
		fmt.Fprintf(&b, " from %s", e.DownloadHost)
	}
	b.WriteString(" failed")
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	} else if e.StatusCode != 0 {
		fmt.Fprintf(&b, ": HTTP status %d", e.StatusCode)
	}
	return b.String()
}

func (e *OriginError) Unwrap() error { return e.Err }

// Timeout reports whether the failure was a timeout: a dial, TLS handshake,
// response header or request deadline, or an archive body that stalled
// longer than Config.IdleTimeout.
func (e *OriginError) Timeout() bool {
	if e.Err == nil {
		return false
	}
	if errors.Is(e.Err, context.DeadlineExceeded) {
		return true
	}
	var te interface{ Timeout() bool }
	return errors.As(e.Err, &te) && te.Timeout()
}

// timeoutError is a timeout of tfmirror's own making (request deadline,
// stalled body).
type timeoutError struct{ msg string }

func (e *timeoutError) Error() string   { return e.msg }
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }

// statusError describes an unexpected HTTP status by its code and the
// standard text for it (statusText), never by the answer's own reason
// phrase: that is the host's text, which may echo the request and the
// credential it carried, as a page may, and runs to the length of a
// header.
func statusError(code int) error {
	return fmt.Errorf("unexpected HTTP status %q", statusText(code))
}

// statusText is code with the standard text for it ("403 Forbidden"), or
// the code alone when it has none: what the mirror says of a status, in
// errors and logs.
func statusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return strconv.Itoa(code) + " " + t
	}
	return strconv.Itoa(code)
}

// MaxErrorText is the most bytes of an operation's error text (Client's
// methods): what an origin's answer puts into it (a platform it names, a
// URL it gives, as much as a document holds) is cut past it
// (logbound.CutError), once the credentials are replaced in the text
// (redact.Credentials).
const MaxErrorText = logbound.MaxErrorText
