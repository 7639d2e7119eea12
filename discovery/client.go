package discovery

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	svchost "github.com/hashicorp/terraform-svchost"
	"golang.org/x/sync/singleflight"

	"github.com/tfmirror/tfmirror/addrs"
	"github.com/tfmirror/tfmirror/internal/redact"
)

// Fixed transport limits.
const (
	dialTimeout           = 10 * time.Second
	tlsHandshakeTimeout   = 10 * time.Second
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

	// RootCAs are the CAs trusted for origin TLS. Default nil: the system
	// roots (SSL_CERT_FILE and SSL_CERT_DIR are honoured).
	RootCAs *x509.CertPool

	// DialContext, when set, replaces the guarded dialer entirely: the
	// AllowPrivate policy is then not applied to connections. Meant for
	// tests. Default nil: the guarded dialer.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)

	// Proxy chooses an HTTP proxy per request. Default
	// http.ProxyFromEnvironment. Connections to the proxy itself are not
	// subject to the AllowPrivate policy; the target host is checked before
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
	// (OriginError.Timeout). Windows follow each other from when the body
	// starts, in wall time. It catches origins that drip bytes just often
	// enough to never trip IdleTimeout. Defaults 1024 (1 KiB/s) and 30s; a
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
}

// Client talks to origin registries. It is safe for concurrent use.
type Client struct {
	cfg           Config
	log           *slog.Logger
	transport     http.RoundTripper // policy (https only, User-Agent) over the guarded *http.Transport
	httpClient    *http.Client      // registry API and downloads: redirect policy on top of transport
	guardedDialer *net.Dialer
	openDialer    *net.Dialer
	proxyAddrs    sync.Map // proxy dial addresses exempt from the guard
	breaker       *breaker
	sleep         func(ctx context.Context, d time.Duration) error // between retries; tests replace it

	allowed map[svchost.Hostname]bool // from Config.AllowedOrigins

	mu    sync.Mutex
	hosts map[svchost.Hostname]*discoEntry
	sf    singleflight.Group
}

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
		host, err := svchost.ForComparison(strings.TrimSpace(h))
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

	c := &Client{
		cfg:           cfg,
		log:           cfg.Logger,
		guardedDialer: &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second, Control: guardControl},
		openDialer:    &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second},
		hosts:         make(map[svchost.Hostname]*discoEntry),
		allowed:       allowed,
		sleep:         sleepCtx,
		breaker: &breaker{
			threshold: cfg.BreakerThreshold,
			cooldown:  cfg.BreakerCooldown,
			now:       cfg.Now,
			hosts:     make(map[string]*circuit),
		},
	}
	c.breaker.notify = c.circuitChanged(cfg.Observer.CircuitOpen)
	base := &http.Transport{
		Proxy:                  c.proxyFor,
		DialContext:            c.dial,
		TLSClientConfig:        &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    tlsHandshakeTimeout,
		ResponseHeaderTimeout:  responseHeaderTimeout,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
		ExpectContinueTimeout:  time.Second,
		IdleConnTimeout:        90 * time.Second,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    8,
		ForceAttemptHTTP2:      true,
	}
	c.transport = &policyTransport{next: base, userAgent: cfg.UserAgent}
	c.httpClient = &http.Client{Transport: c.transport, CheckRedirect: checkRedirect}
	return c, nil
}

// policyTransport refuses anything but https and sets the User-Agent.
type policyTransport struct {
	next      http.RoundTripper
	userAgent string
}

// errNotHTTPS is a policy refusal, never retried.
var errNotHTTPS = errors.New("unsupported protocol scheme: only https is allowed")

func (t *policyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("%w (got %q)", errNotHTTPS, req.URL.Scheme)
	}
	r := req.Clone(req.Context())
	r.Header.Set("User-Agent", t.userAgent)
	return t.next.RoundTrip(r)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// checkRedirect follows at most maxRedirects redirects, only to https, and
// drops the Authorization header when a redirect leaves the first request's
// host (net/http would keep it for subdomains).
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects {
		return &redirectRefused{fmt.Sprintf("stopped after %d redirects", maxRedirects)}
	}
	if req.URL.Scheme != "https" {
		return &redirectRefused{fmt.Sprintf("refusing redirect to a non-https URL (%s://%s)", req.URL.Scheme, req.URL.Host)}
	}
	if hostKey(req.URL) != hostKey(via[0].URL) {
		req.Header.Del("Authorization")
	}
	return nil
}

// hostKey spells a URL's host the way svchost.Hostname does for comparison:
// lowercase, without the default port 443.
func hostKey(u *url.URL) string {
	h := strings.ToLower(u.Hostname())
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if p := u.Port(); p != "" && p != "443" {
		h += ":" + p
	}
	return h
}

// checkHost refuses a host that is not one of Config.AllowedOrigins. It is
// the first thing every method does, before any lookup or connection.
func (c *Client) checkHost(host svchost.Hostname) error {
	if !c.allowed[host] {
		return fmt.Errorf("%w: %q", ErrHostNotAllowed, host.ForDisplay())
	}
	return nil
}

// token returns the bearer token to send with a request to u on behalf of
// the origin host, "" when none may be sent.
func (c *Client) token(host svchost.Hostname, u *url.URL) string {
	if c.cfg.Credentials == nil || hostKey(u) != string(host) {
		return ""
	}
	return c.cfg.Credentials(host)
}

// request describes one GET to an origin.
type request struct {
	p      addrs.Provider
	op     string
	u      *url.URL
	accept string
	// anonymous sends no credentials, even to the origin host itself
	// (module sources: see OpenSource).
	anonymous bool
}

func (c *Client) originError(r request, status int, err error) *OriginError {
	e := &OriginError{Host: string(r.p.Hostname), Op: r.op, StatusCode: status, Err: err}
	if h := hostKey(r.u); h != string(r.p.Hostname) {
		e.DownloadHost = h
	}
	return e
}

// do sends r on ctx. Failures are *OriginError, except that the caller's own
// cancellation or deadline is returned as such.
func (c *Client) do(ctx, reqCtx context.Context, r request) (*http.Response, error) {
	req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, r.u.String(), nil)
	if err != nil {
		return nil, c.originError(r, 0, err)
	}
	req.Header.Set("Accept", r.accept)
	if tok := c.token(r.p.Hostname, r.u); tok != "" && !r.anonymous {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if r.op == OpModuleSource {
		// Only a credential the caller tied to this fetch, only to its
		// host (checkRedirect drops it when a redirect leaves that host).
		if a := sourceAuthorization(reqCtx, r.u, false); a != "" {
			req.Header.Set("Authorization", a)
		}
	}
	start := time.Now()
	resp, err := c.httpClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s %s for %s: %w", r.op, redact.URL(r.u), r.p, ctx.Err())
		}
		c.log.LogAttrs(ctx, slog.LevelDebug, "origin request failed",
			slog.String("op", r.op), slog.String("url", redact.URL(r.u)), slog.Any("error", err))
		return nil, c.originError(r, 0, c.causeOf(reqCtx, stripURL(err)))
	}
	c.log.LogAttrs(ctx, slog.LevelDebug, "origin request",
		slog.String("op", r.op), slog.String("url", redact.URL(r.u)),
		slog.Int("status", resp.StatusCode), slog.Duration("duration", time.Since(start)))
	return resp, nil
}

// causeOf replaces err by the cancellation cause of reqCtx when that is one
// of ours (a request deadline or a stalled body).
func (c *Client) causeOf(reqCtx context.Context, err error) error {
	var te *timeoutError
	if cause := context.Cause(reqCtx); errors.As(cause, &te) {
		return cause
	}
	return err
}

// stripURL removes the URL that *url.Error puts into its message: a download
// URL may carry pre-signed credentials, and OriginError names the host.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// readBody reads a whole response body of at most limit bytes. Failures are
// *OriginError, except the caller's own cancellation.
func (c *Client) readBody(ctx, reqCtx context.Context, r request, body io.Reader, limit int64) ([]byte, error) {
	data, err := readLimited(body, limit)
	if err == nil && reqCtx.Err() != nil {
		// net/http can end a body cleanly when its request is canceled
		// mid-read, so a body that "ended" after the deadline is suspect.
		err = reqCtx.Err()
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s for %s: %w", r.op, r.p, ctx.Err())
		}
		return nil, c.originError(r, 0, c.causeOf(reqCtx, err))
	}
	return data, nil
}

// readLimited reads all of body, failing with ErrTooLarge past limit bytes.
func readLimited(body io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: body exceeds %d bytes", ErrTooLarge, limit)
	}
	return data, nil
}

// drain discards a little of an unwanted body so the connection can be
// reused, then closes it.
func drain(body io.ReadCloser) {
	io.Copy(io.Discard, io.LimitReader(body, 4<<10))
	body.Close()
}

// Observer receives what the client observes of origins. Origins are
// reported by the provider's origin host, also for downloads from other
// hosts, so the set of values is bounded by the allowed origins.
type Observer interface {
	// OriginRequest records one operation (an Op* constant) and its outcome:
	// success, not_found, refused (network policy), timeout or error.
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

// observe reports the outcome of an operation that started at start; it
// is deferred with a pointer to the operation's named error result.
func (c *Client) observe(host svchost.Hostname, op string, start time.Time, err *error) {
	c.cfg.Observer.OriginRequest(string(host), op, Outcome(*err), time.Since(start))
}

// Outcome classifies an error of this package as a bounded label value.
func Outcome(err error) string {
	var oe *OriginError
	switch {
	case err == nil:
		return "success"
	case errors.Is(err, ErrNotFound):
		return "not_found"
	case errors.Is(err, ErrPrivateAddress), errors.Is(err, ErrHostNotAllowed):
		return "refused"
	case errors.As(err, &oe) && oe.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	default:
		return "error"
	}
}
