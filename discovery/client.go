package discovery

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/flights"
)

// Fixed transport limits.
const (
	dialTimeout         = 10 * time.Second
	tlsHandshakeTimeout = 10 * time.Second
	// proxyHandshakeTimeout bounds a SOCKS5 proxy's handshake, from the
	// connection to the proxy opened until its reply to the connection
	// request read, and an HTTP proxy's answer to CONNECT, from the
	// CONNECT written until its answer read: the proxy connects to the
	// host before it replies (a dial's bound, and as much again for its
	// name lookup and its answers). The TLS handshake through the
	// tunnel has its own.
	proxyHandshakeTimeout = 2 * dialTimeout
	responseHeaderTimeout = 30 * time.Second
	// maxResponseHeaderBytes bounds a response's headers (net/http's
	// default is 10 MiB): what a fetch holds of a response before its
	// body is read.
	maxResponseHeaderBytes = 1 << 20
	maxRedirects           = 5
)

// Config configures a Client. The zero value is usable: it serves the
// public registries only.
type Config struct {
	// AllowedOrigins are the origin registry hosts whose providers the
	// client may fetch, in any form svchost.ForComparison accepts (names,
	// IDN, an optional port). Every method refuses a provider, or a
	// discovery, of any other host with ErrHostNotAllowed before any name
	// lookup or connection. The hosts that the registry's package responses
	// name for SHA256SUMS, signatures and archives (release CDNs) are not
	// limited to these; the address policy (AllowPrivate) applies to them.
	// Default: registry.terraform.io and registry.opentofu.org
	// (DefaultAllowedOrigins).
	AllowedOrigins []string

	// UserAgent is sent with every request. Default "tfmirror".
	UserAgent string

	// AllowPrivate permits connections to non-public addresses (loopback,
	// RFC 1918, link-local, CGNAT, ULA, multicast and so on; see
	// IsPublicAddr). Default false: such connections are refused with
	// ErrPrivateAddress. The check is made on the resolved address at dial
	// time, so DNS rebinding cannot get round it.
	AllowPrivate bool

	// RootCAs are the CAs trusted for TLS to origins, download hosts and
	// module source hosts. Default nil: the system roots (SSL_CERT_FILE
	// and SSL_CERT_DIR are honoured). tfmirror serve passes the system
	// roots with the CAs of --origin-ca-file added.
	RootCAs *x509.CertPool

	// TrustHint ends the message of every certificate failure
	// (CertificateError): what the operator can do about it, such as the
	// setting that adds a CA. Default "": nothing.
	TrustHint string

	// DialContext, when set, replaces the guarded dialer entirely: the
	// AllowPrivate policy is then not applied to connections. Meant for
	// tests. Default nil: the guarded dialer.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)

	// LookupNetIP resolves the target host of a request sent through a
	// proxy, which is refused when it resolves to a non-public address
	// (unless AllowPrivate); a failure or no answer within 2 seconds lets
	// the request go to the proxy, which resolves it itself. Meant for
	// tests. Default net.DefaultResolver.LookupNetIP.
	LookupNetIP func(ctx context.Context, network, host string) ([]netip.Addr, error)

	// Proxy chooses an HTTP proxy per request. Default
	// http.ProxyFromEnvironment. Connections to the proxy itself, for the
	// requests sent through it, are not subject to the AllowPrivate policy
	// (a request sent direct to the proxy's address is); the target host is checked before
	// the request is sent through the proxy (best effort, see IsPublicAddr).
	Proxy func(*http.Request) (*url.URL, error)

	// Credentials returns the bearer token for an origin host, "" for none.
	// The token is sent only to requests whose URL host is that origin host
	// (discovery, the registry API, and downloads served by the origin host
	// itself), never to other hosts, redirects included. Default nil: no
	// credentials.
	Credentials func(host svchost.Hostname) string

	// DiscoveryTTL is how long a discovery result is used before it is
	// refreshed. A refresh that fails serves the previous result, marked
	// stale, and is retried no sooner than a minute later (or DiscoveryTTL
	// if that is shorter). Default 1h.
	DiscoveryTTL time.Duration

	// RequestTimeout bounds each registry API, SHA256SUMS and signature
	// request, body included. Default 30s.
	RequestTimeout time.Duration

	// IdleTimeout aborts an archive download when a read of its body gets no
	// data for this long. Default 60s.
	IdleTimeout time.Duration

	// MinSpeed and MinSpeedWindow are the low-speed limit of archive
	// downloads, in the spirit of curl's --speed-limit and --speed-time: a
	// download that receives fewer than MinSpeed bytes per second on
	// average over a window of MinSpeedWindow is aborted as a timeout
	// (OriginError.Timeout). Windows follow each other from the first
	// read, in the time the reads wait for the origin (not the caller's
	// between them: a slow local disk is not a slow origin). It catches
	// origins that drip bytes just often enough to never trip IdleTimeout. Defaults 1024 (1 KiB/s) and 30s; a
	// negative value of either disables the limit.
	MinSpeed       int64
	MinSpeedWindow time.Duration

	// MaxDocumentBytes limits registry JSON responses, and FetchDocument
	// when its caller passes no limit. Default 16 MiB.
	MaxDocumentBytes int64

	// MaxArchiveBytes limits provider archives. Default 2 GiB.
	MaxArchiveBytes int64

	// Retries is how many times a failed idempotent origin request is
	// retried: connection failures, timeouts, 429 and 5xx answers other
	// than 501. Archive downloads are retried only before their body
	// started. Default 2; negative disables retries.
	Retries int

	// RetryBaseDelay is the wait before the first retry; it doubles for each
	// further one, with jitter (a random wait between half and all of it).
	// Default 250ms.
	RetryBaseDelay time.Duration

	// RetryMaxDelay caps the wait between retries. Default 5s.
	RetryMaxDelay time.Duration

	// RetryAfterMax is the longest Retry-After an origin may ask for that
	// is obeyed; an origin asking for a longer wait is not retried. Default 10s.
	RetryAfterMax time.Duration

	// BreakerThreshold is how many consecutive failed requests (as counted
	// for retries) open an origin's circuit breaker. While it is open,
	// requests to that origin fail at once with ErrCircuitOpen; after
	// BreakerCooldown one probe request is let through, whose success
	// closes the circuit. Requests to an origin's download hosts count for
	// that origin. Default 5; negative disables the breaker.
	BreakerThreshold int

	// BreakerCooldown is how long an open circuit stays open. Default 30s.
	BreakerCooldown time.Duration

	// Now is the clock used for the discovery TTL. Default time.Now.
	Now func() time.Time

	// Logger receives debug records of origin requests and warnings about
	// stale discovery results. Default: discard.
	Logger *slog.Logger

	// Observer, if set, is told of every origin operation, discovery
	// cache lookup, circuit change and stale discovery result (package
	// metrics implements it). Default nil: nothing is recorded.
	Observer Observer

	// Watcher, if set, is told of the end of every origin operation with
	// its error, for per-origin health (the status page's origin rows).
	// Default nil.
	Watcher OriginWatcher

	// MirrorHost, if set, returns the host of the mirror's own public URL
	// in force ("" when it has none): a module source request for a URL
	// on that host (a registry's download location, a submodule, a Git
	// redirect) is refused before it is sent, with a
	// modsource.UnsupportedError, since the mirror would ask itself.
	// Default nil: no host is refused so.
	MirrorHost func() string
}

// OriginWatcher is told of the end of each origin operation (an Op*
// constant, after its retries) with its error, nil on success; origin is
// the provider's or module's origin host, also for its download hosts. It
// must not block.
type OriginWatcher interface {
	OriginDone(origin, operation string, err error)
}

// Client talks to origin registries. It is safe for concurrent use.
//
// It is made of one part per concern, each holding only its own state, all
// sending through one transport (transport.go, with the dial guard of
// guard.go and the retries and circuit breaker of resilience.go): service
// discovery with its cache (discover.go), the provider registry protocol
// (registry.go), the module registry protocol and the source hosts
// (modules.go), and the downloads of documents, archives and module
// packages (download.go).
type Client struct {
	tr        *transport
	discovery *discoverer
	providers *providerRegistry
	modules   *moduleRegistry
	downloads *downloads
}

// Close ends the service discoveries under way, which run apart from the
// callers that asked for them (one caller leaving does not end a
// discovery the others wait for), and returns once they have ended; the
// callers still waiting for one, and a discovery asked for afterwards,
// fail with ErrClosed. The other requests
// run on their callers' contexts. Close the client after its users (the
// engine, the releases side) have stopped.
func (c *Client) Close() { c.discovery.close() }

// DefaultAllowedOrigins returns the origin hosts a Client allows when
// Config.AllowedOrigins is empty: the public Terraform and OpenTofu registries.
func DefaultAllowedOrigins() []string {
	return []string{"registry.terraform.io", "registry.opentofu.org"}
}

// New validates cfg, fills in defaults and returns a Client.
func New(cfg Config) (*Client, error) {
	if len(cfg.AllowedOrigins) == 0 {
		cfg.AllowedOrigins = DefaultAllowedOrigins()
	}
	allowed := make(map[svchost.Hostname]bool, len(cfg.AllowedOrigins))
	for _, h := range cfg.AllowedOrigins {
		host, err := addrs.ParseHost(strings.TrimSpace(h))
		if err != nil {
			return nil, fmt.Errorf("discovery: allowed origin %q: %w", h, err)
		}
		allowed[host] = true
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "tfmirror"
	}
	if strings.ContainsAny(cfg.UserAgent, "\r\n\x00") {
		return nil, errors.New("discovery: UserAgent contains control characters")
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"DiscoveryTTL", &cfg.DiscoveryTTL, time.Hour},
		{"RequestTimeout", &cfg.RequestTimeout, 30 * time.Second},
		{"IdleTimeout", &cfg.IdleTimeout, 60 * time.Second},
		{"RetryBaseDelay", &cfg.RetryBaseDelay, 250 * time.Millisecond},
		{"RetryMaxDelay", &cfg.RetryMaxDelay, 5 * time.Second},
		{"RetryAfterMax", &cfg.RetryAfterMax, 10 * time.Second},
		{"BreakerCooldown", &cfg.BreakerCooldown, 30 * time.Second},
	} {
		if *d.v < 0 {
			return nil, fmt.Errorf("discovery: %s must not be negative (got %s)", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	for _, l := range []struct {
		name string
		v    *int64
		def  int64
	}{
		{"MaxDocumentBytes", &cfg.MaxDocumentBytes, 16 << 20},
		{"MaxArchiveBytes", &cfg.MaxArchiveBytes, 2 << 30},
	} {
		if *l.v < 0 {
			return nil, fmt.Errorf("discovery: %s must not be negative (got %d)", l.name, *l.v)
		}
		if *l.v == 0 {
			*l.v = l.def
		}
	}
	switch {
	case cfg.MinSpeed < 0 || cfg.MinSpeedWindow < 0:
		cfg.MinSpeed, cfg.MinSpeedWindow = 0, 0 // disabled
	default:
		if cfg.MinSpeed == 0 {
			cfg.MinSpeed = 1 << 10
		}
		if cfg.MinSpeedWindow == 0 {
			cfg.MinSpeedWindow = 30 * time.Second
		}
	}
	switch {
	case cfg.Retries == 0:
		cfg.Retries = 2
	case cfg.Retries < 0:
		cfg.Retries = 0
	}
	switch {
	case cfg.BreakerThreshold == 0:
		cfg.BreakerThreshold = 5
	case cfg.BreakerThreshold < 0:
		cfg.BreakerThreshold = 0
	}
	if cfg.Proxy == nil {
		cfg.Proxy = http.ProxyFromEnvironment
	}
	if cfg.Observer == nil {
		cfg.Observer = noObserver{}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}

	guard := newDialGuard(cfg)
	tr := &transport{
		guard:            guard,
		log:              cfg.Logger,
		observer:         cfg.Observer,
		watcher:          cfg.Watcher,
		allowed:          allowed,
		credentials:      cfg.Credentials,
		mirrorHost:       cfg.MirrorHost,
		sleep:            sleepCtx,
		requestTimeout:   cfg.RequestTimeout,
		maxDocumentBytes: cfg.MaxDocumentBytes,
		retries:          cfg.Retries,
		retryBaseDelay:   cfg.RetryBaseDelay,
		retryMaxDelay:    cfg.RetryMaxDelay,
		retryAfterMax:    cfg.RetryAfterMax,
		breaker: &breaker{
			threshold: cfg.BreakerThreshold,
			cooldown:  cfg.BreakerCooldown,
			now:       cfg.Now,
			notify:    logCircuit(cfg.Logger, cfg.BreakerCooldown, cfg.Observer.CircuitOpen),
			hosts:     make(map[string]*circuit),
		},
	}
	transportFor := func(roots *x509.CertPool) *http.Transport {
		return &http.Transport{
			Proxy:                  guard.proxyFor,
			DialContext:            guard.dial,
			TLSClientConfig:        &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
			TLSHandshakeTimeout:    tlsHandshakeTimeout,
			ResponseHeaderTimeout:  responseHeaderTimeout,
			MaxResponseHeaderBytes: maxResponseHeaderBytes,
			ExpectContinueTimeout:  time.Second,
			IdleConnTimeout:        90 * time.Second,
			MaxIdleConns:           100,
			MaxIdleConnsPerHost:    8,
			ForceAttemptHTTP2:      true,
			// The CONNECT's answer is bounded from when it is asked until it
			// is read (connectAsked, connectAnswered).
			GetProxyConnectHeader: guard.connectAsked,
			// A refused CONNECT says so, naming the proxy's settings: on its
			// own net/http returns the bare status text ("Forbidden"), which
			// reads as the origin's answer. The proxy answered in HTTP: what
			// fails from here on is not its break of the protocol
			// (connectBroken).
			OnProxyConnectResponse: func(ctx context.Context, _ *url.URL, req *http.Request, resp *http.Response) error {
				if pc := choiceOf(ctx); pc != nil {
					pc.connectAnswered(ctx)
				}
				if resp.StatusCode == http.StatusOK {
					return nil
				}
				return &ProxyError{Target: req.URL.Opaque, StatusCode: resp.StatusCode}
			},
		}
	}
	base := &rootsTransport{make: transportFor}
	base.cur.Store(transportFor(cfg.RootCAs))
	tr.base = base
	refusals := &refusalTransport{next: base, log: cfg.Logger}
	trust := &trustTransport{next: refusals, log: cfg.Logger, hint: cfg.TrustHint}
	tr.rt = &policyTransport{next: trust, userAgent: cfg.UserAgent}
	tr.httpClient = &http.Client{Transport: tr.rt, CheckRedirect: tr.checkRedirect}

	disc := &discoverer{tr: tr, ttl: cfg.DiscoveryTTL, now: cfg.Now, hosts: make(map[svchost.Hostname]*discoEntry), flights: flights.New(cfg.Logger)}
	return &Client{
		tr:        tr,
		discovery: disc,
		providers: &providerRegistry{tr: tr, discovery: disc},
		modules:   &moduleRegistry{tr: tr, discovery: disc},
		downloads: &downloads{
			tr:              tr,
			idle:            cfg.IdleTimeout,
			minSpeed:        cfg.MinSpeed,
			minSpeedWindow:  cfg.MinSpeedWindow,
			maxArchiveBytes: cfg.MaxArchiveBytes,
		},
	}, nil
}

// hosts, so the set of values is bounded by the allowed origins.
type Observer interface {
	// OriginRequest records one operation (an Op* constant) and its outcome:
	// success, not_found, refused (network policy), untrusted (a TLS
	// certificate the client does not trust), proxy (the upstream proxy's
	// failure, not the origin's: ProxyError.ProxyFault), timeout or error.
	OriginRequest(origin, operation, outcome string, d time.Duration)
	// OriginBytes records archive bytes received from origin.
	OriginBytes(origin string, n int64)
	// CacheLookup records whether a discovery result was cached ("discovery").
	CacheLookup(kind string, hit bool)
	CircuitObserver
	StaleObserver
}

type noObserver struct{}

func (noObserver) OriginRequest(string, string, string, time.Duration) {}
func (noObserver) OriginBytes(string, int64)                           {}
func (noObserver) CacheLookup(string, bool)                            {}
func (noObserver) CircuitOpen(string, bool)                            {}
func (noObserver) StaleServed(string)                                  {}

// Outcome classifies an error of this package as a bounded label value.
func Outcome(err error) string {
	var oe *OriginError
	var pe *ProxyError
	switch {
	case err == nil:
		return "success"
	case errors.Is(err, ErrNotFound):
		return "not_found"
	case errors.Is(err, ErrPrivateAddress), errors.Is(err, ErrHostNotAllowed):
		return "refused"
	case errors.Is(err, ErrUntrustedCertificate):
		return "untrusted"
	case errors.As(err, &pe) && pe.ProxyFault():
		return "proxy"
	case errors.As(err, &oe) && oe.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	default:
		return "error"
	}
}
