package discovery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	svchost "github.com/hashicorp/terraform-svchost"
	"github.com/hashicorp/terraform-svchost/disco"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/flights"
	"github.com/tfmirror/tfmirror/v2/internal/jsonbound"
	"github.com/tfmirror/tfmirror/v2/internal/redact"
)

const (
	providersService = "providers.v1"
	modulesService   = "modules.v1"

	// discoveryPath is where a host publishes its discovery document.
	discoveryPath = "/.well-known/terraform.json"

	// maxDiscoveryBytes limits a discovery document, as disco does.
	maxDiscoveryBytes = 1 << 20
	// maxDiscoveryDepth and maxDiscoveryElements bound what the document
	// may build when decoded (its nesting; its array elements and object
	// members in all).
	maxDiscoveryDepth    = 8
	maxDiscoveryElements = 4096

	// staleRetryInterval is the least time between refresh attempts of a
	// host whose last refresh failed (capped at DiscoveryTTL).
	staleRetryInterval = time.Minute
)

// Discovery is the result of service discovery on one host.
type Discovery struct {
	// ProvidersURL is the absolute https base URL of the host's provider
	// registry (the providers.v1 service).
	ProvidersURL *url.URL
	// FetchedAt is when the result was fetched from the host.
	FetchedAt time.Time
	// Stale is true when the result is older than the TTL because
	// refreshing it failed; RefreshErr says why.
	Stale      bool
	RefreshErr error
}

// discoverer runs service discovery and caches its results for the TTL:
// one discovery per host at a time, shared by its concurrent callers.
type discoverer struct {
	tr  *transport
	ttl time.Duration    // Config.DiscoveryTTL
	now func() time.Time // Config.Now

	mu    sync.Mutex
	hosts map[svchost.Hostname]*discoEntry

	// The discoveries under way, each run once for its concurrent
	// callers and apart from them (one leaving does not end it for the
	// others) until Client.Close ends them and waits for them.
	flights *flights.Group
}

// ErrClosed is the error of a service discovery asked for after
// Client.Close.
var ErrClosed = errors.New("discovery: the origin client is closed")

// close ends the discoveries under way and waits for them; their callers
// still waiting, and those asked for afterwards, fail with ErrClosed.
func (d *discoverer) close() { d.flights.Close() }

// discoEntry is the cached discovery of one host. Entries are replaced, never
// modified, except for the refresh-failure fields under discoverer.mu.
type discoEntry struct {
	providers *url.URL // nil when the host has no providers.v1
	modules   *url.URL // the host's modules.v1, nil when it has none
	noService error    // ErrNoProviderService with detail, when providers is nil
	// noDocument: the host answered 404 for its discovery document. It is
	// asked again after staleRetryInterval (not DiscoveryTTL), and never
	// replaces a registry the host served before (see refresh).
	noDocument bool
	fetchedAt  time.Time

	refreshErr      error
	refreshFailedAt time.Time
}

func (e *discoEntry) result(stale bool) (Discovery, error) {
	if e.providers == nil {
		return Discovery{}, e.noService
	}
	u := *e.providers
	d := Discovery{ProvidersURL: &u, FetchedAt: e.fetchedAt}
	if stale {
		d.Stale, d.RefreshErr = true, e.refreshErr
	}
	return d, nil
}

// ProvidersURL returns the base URL of host's provider registry from service
// discovery, fetched at most once per DiscoveryTTL. When a refresh fails the
// previous result is returned (and a warning logged). Errors are
// ErrHostNotAllowed or ErrNoProviderService (wrapped), *OriginError with Op
// "discovery", or the caller's context error.
func (c *Client) ProvidersURL(ctx context.Context, host svchost.Hostname) (*url.URL, error) {
	return c.discovery.providersURL(ctx, host)
}

func (d *discoverer) providersURL(ctx context.Context, host svchost.Hostname) (*url.URL, error) {
	res, err := d.discover(ctx, host)
	if err != nil {
		return nil, err
	}
	return res.ProvidersURL, nil
}

// Discover is ProvidersURL with the detail of how fresh the result is.
// Concurrent calls for one host share one discovery, which runs on a
// context of its own: a caller that gives up does not cancel it for the
// others, and its result is cached for them.
func (c *Client) Discover(ctx context.Context, host svchost.Hostname) (Discovery, error) {
	return c.discovery.discover(ctx, host)
}

func (d *discoverer) discover(ctx context.Context, host svchost.Hostname) (Discovery, error) {
	if host == "" {
		return Discovery{}, errors.New("discovery: empty hostname")
	}
	if err := d.tr.checkHost(host); err != nil {
		return Discovery{}, err
	}
	if res, ok, err := d.cached(host); ok {
		d.tr.observer.CacheLookup("discovery", true)
		return res, err
	}
	d.tr.observer.CacheLookup("discovery", false)
	v, err := d.flights.Do(ctx, string(host), func(ctx context.Context) (any, error) {
		return d.refresh(ctx, host)
	})
	switch {
	case errors.Is(err, flights.ErrClosed):
		return Discovery{}, fmt.Errorf("service discovery for %s: %w", host, ErrClosed)
	case err != nil && err == ctx.Err():
		return Discovery{}, fmt.Errorf("service discovery for %s: %w", host, err)
	}
	res, _ := v.(Discovery)
	return res, err
}

// ttl is how long e is used, of a discoverer whose results live ttl: a
// 404 for the discovery document (noDocument) is asked again after
// staleRetryInterval.
func (e *discoEntry) ttl(ttl time.Duration) time.Duration {
	if e.noDocument {
		return min(staleRetryInterval, ttl)
	}
	return ttl
}

// cached returns the cached result for host if it needs no refresh now.
func (d *discoverer) cached(host svchost.Hostname) (Discovery, bool, error) {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.hosts[host]
	switch {
	case e == nil:
		return Discovery{}, false, nil
	case now.Sub(e.fetchedAt) < e.ttl(d.ttl):
		res, err := e.result(false)
		return res, true, err
	case e.refreshErr != nil && now.Sub(e.refreshFailedAt) < min(staleRetryInterval, d.ttl):
		res, err := e.result(true)
		return res, true, err
	}
	return Discovery{}, false, nil
}

// KnownModulesURL returns the base URL of host's module registry (the
// modules.v1 service) as the last successful service discovery of host
// gave it, or nil when there was none or it lists no https modules.v1. It
// never contacts the host.
func (c *Client) KnownModulesURL(host svchost.Hostname) *url.URL {
	return c.discovery.knownModulesURL(host)
}

func (d *discoverer) knownModulesURL(host svchost.Hostname) *url.URL {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.hosts[host]
	if e == nil || e.modules == nil {
		return nil
	}
	u := *e.modules
	return &u
}

// refresh is the single-flight leader for host.
func (d *discoverer) refresh(ctx context.Context, host svchost.Hostname) (Discovery, error) {
	if res, ok, err := d.cached(host); ok {
		return res, err // another leader finished just before this one started
	}
	start := time.Now()
	entry, err := d.discoverRemote(ctx, host)
	d.tr.observe(host, OpDiscovery, start, &err)
	now := d.now()

	d.mu.Lock()
	defer d.mu.Unlock()
	prev := d.hosts[host]
	if err == nil && entry.noDocument && prev != nil && prev.providers != nil {
		// A host that served a registry and now answers 404 for its
		// discovery document (a deployment, a CDN's or a proxy's
		// moment) is not taken for no registry: its previous result is
		// served, stale, as after any failed refresh.
		err = entry.noService
	}
	if err == nil {
		entry.fetchedAt = now
		d.hosts[host] = entry
		return entry.result(false)
	}
	if prev == nil {
		return Discovery{}, err
	}
	prev.refreshErr, prev.refreshFailedAt = err, now
	d.tr.observer.StaleServed("discovery")
	d.tr.log.LogAttrs(ctx, slog.LevelWarn, "service discovery refresh failed; using the previous result",
		slog.String("host", string(host)), slog.Time("fetched_at", prev.fetchedAt), slog.Any("error", err))
	return prev.result(true)
}

// discoverRemote fetches host's discovery document like every other
// registry request (send: the per-request timeout, retries with backoff,
// the circuit breaker, the network policy and credentials) and lets disco
// parse it. Every attempt is bounded, so the discovery is too; it needs no
// deadline of its own.
func (d *discoverer) discoverRemote(ctx context.Context, host svchost.Hostname) (*discoEntry, error) {
	r := request{
		p:      addrs.Provider{Hostname: host},
		op:     OpDiscovery,
		u:      &url.URL{Scheme: "https", Host: host.String(), Path: discoveryPath},
		accept: "application/json",
	}
	resp, reqCtx, end, err := d.tr.send(ctx, r, d.tr.requestContext(ctx))
	if err != nil {
		return nil, err
	}
	defer end()
	defer resp.Body.Close()
	r.u = resp.Request.URL
	noService := &discoEntry{noService: fmt.Errorf("%s: %w", host, ErrNoProviderService)}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		drain(resp.Body) // no discovery document: not a registry
		noService.noDocument = true
		return noService, nil
	default:
		drain(resp.Body)
		return nil, originError(r, resp.StatusCode, statusError(resp.StatusCode))
	}
	if resp.ContentLength > maxDiscoveryBytes {
		drain(resp.Body)
		return nil, originError(r, 0, fmt.Errorf("%w: Content-Length %d exceeds %d bytes",
			ErrTooLarge, resp.ContentLength, maxDiscoveryBytes))
	}
	data, err := d.tr.readBody(ctx, reqCtx, r, resp.Body, maxDiscoveryBytes)
	if err != nil {
		return nil, err
	}
	// disco decodes the whole document into maps and slices, whatever it
	// holds: bounded first, as every answer of an origin is. A discovery
	// document is a few services, none nested deeper than a login
	// service's lists.
	if err := jsonbound.Check(data, jsonbound.Limits{Depth: maxDiscoveryDepth, Elements: maxDiscoveryElements}); err != nil {
		return nil, originError(r, 0, fmt.Errorf("%w: %v", ErrTooLarge, err))
	}

	// disco parses the document it is handed: the answer already
	// received, with the request it answered, so that relative service
	// URLs resolve against the document's final URL as disco would. A
	// fresh disco.Disco per call keeps disco's own (TTL-less) cache out of
	// the way.
	dc := disco.New()
	dc.Transport = roundTripperFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{
			Status:        statusText(resp.StatusCode),
			StatusCode:    resp.StatusCode,
			Proto:         resp.Proto,
			ProtoMajor:    resp.ProtoMajor,
			ProtoMinor:    resp.ProtoMinor,
			Header:        resp.Header.Clone(),
			Body:          io.NopCloser(bytes.NewReader(data)),
			ContentLength: int64(len(data)),
			Request:       resp.Request,
		}, nil
	})
	var notProvided *disco.ErrServiceNotProvided
	var notSupported *disco.ErrVersionNotSupported
	h, err := dc.Discover(host)
	switch {
	case err == nil:
	case errors.As(err, &notProvided), errors.As(err, &notSupported):
		return noService, nil
	default:
		return nil, originError(r, 0, err)
	}
	// The modules.v1 service whatever the providers: a module-only
	// registry (GitLab's, a private one) has no providers.v1.
	var modules *url.URL
	if mu, err := h.ServiceURL(modulesService); err == nil && mu.Scheme == "https" {
		modules = mu
	}
	u, err := h.ServiceURL(providersService)
	switch {
	case err == nil:
	case errors.As(err, &notProvided), errors.As(err, &notSupported):
		noService.modules = modules
		return noService, nil
	default:
		return nil, originError(r, 0, err)
	}
	if u.Scheme != "https" {
		return nil, originError(r, 0, fmt.Errorf("%s URL %q is not https", providersService, redact.URL(u)))
	}
	return &discoEntry{providers: u, modules: modules}, nil
}
