package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	svchost "github.com/hashicorp/terraform-svchost"
	"github.com/hashicorp/terraform-svchost/disco"
)

const (
	providersService = "providers.v1"

	// discoveryLeaderTimeout bounds one discovery, which disco itself
	// bounds to 5 s per attempt and 4 attempts.
	discoveryLeaderTimeout = 30 * time.Second

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

// discoEntry is the cached discovery of one host. Entries are replaced, never
// modified, except for the refresh-failure fields under Client.mu.
type discoEntry struct {
	providers *url.URL // nil when the host has no providers.v1
	noService error    // ErrNoProviderService with detail, when providers is nil
	fetchedAt time.Time

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
	d, err := c.Discover(ctx, host)
	if err != nil {
		return nil, err
	}
	return d.ProvidersURL, nil
}

// Discover is ProvidersURL with the detail of how fresh the result is.
// Concurrent calls for one host share one discovery, which runs on a
// context of its own: a caller that gives up does not cancel it for the
// others, and its result is cached for them.
func (c *Client) Discover(ctx context.Context, host svchost.Hostname) (Discovery, error) {
	if host == "" {
		return Discovery{}, errors.New("discovery: empty hostname")
	}
	if err := c.checkHost(host); err != nil {
		return Discovery{}, err
	}
	if d, ok, err := c.cached(host); ok {
		c.cfg.Observer.CacheLookup("discovery", true)
		return d, err
	}
	c.cfg.Observer.CacheLookup("discovery", false)
	ch := c.sf.DoChan(string(host), func() (any, error) {
		d, err := c.refresh(context.WithoutCancel(ctx), host)
		return d, err
	})
	select {
	case r := <-ch:
		d, _ := r.Val.(Discovery)
		return d, r.Err
	case <-ctx.Done():
		return Discovery{}, fmt.Errorf("service discovery for %s: %w", host, ctx.Err())
	}
}

// cached returns the cached result for host if it needs no refresh now.
func (c *Client) cached(host svchost.Hostname) (Discovery, bool, error) {
	now := c.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.hosts[host]
	switch {
	case e == nil:
		return Discovery{}, false, nil
	case now.Sub(e.fetchedAt) < c.cfg.DiscoveryTTL:
		d, err := e.result(false)
		return d, true, err
	case e.refreshErr != nil && now.Sub(e.refreshFailedAt) < min(staleRetryInterval, c.cfg.DiscoveryTTL):
		d, err := e.result(true)
		return d, true, err
	}
	return Discovery{}, false, nil
}

// refresh is the single-flight leader for host.
func (c *Client) refresh(ctx context.Context, host svchost.Hostname) (Discovery, error) {
	if d, ok, err := c.cached(host); ok {
		return d, err // another leader finished just before this one started
	}
	ctx, cancel := context.WithTimeout(ctx, discoveryLeaderTimeout)
	defer cancel()
	start := time.Now()
	var entry *discoEntry
	probe, err := c.breaker.allow(string(host))
	if err != nil {
		err = &OriginError{Host: string(host), Op: OpDiscovery, Err: err}
	} else {
		entry, err = c.discoverRemote(ctx, host)
		c.breaker.record(string(host), probe, discoveryResult(ctx, err))
	}
	c.observe(host, OpDiscovery, start, &err)
	now := c.cfg.Now()

	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		entry.fetchedAt = now
		c.hosts[host] = entry
		return entry.result(false)
	}
	prev := c.hosts[host]
	if prev == nil {
		return Discovery{}, err
	}
	prev.refreshErr, prev.refreshFailedAt = err, now
	if so, ok := c.cfg.Observer.(StaleObserver); ok {
		so.StaleServed("discovery")
	}
	c.log.LogAttrs(ctx, slog.LevelWarn, "service discovery refresh failed; using the previous result",
		slog.String("host", string(host)), slog.Time("fetched_at", prev.fetchedAt), slog.Any("error", err))
	return prev.result(true)
}

// discoverRemote runs disco against host. A fresh disco.Disco per call
// keeps disco's own (TTL-less) cache out of the way and lets its transport
// record what happened on the wire, which disco's errors do not carry.
func (c *Client) discoverRemote(ctx context.Context, host svchost.Hostname) (*discoEntry, error) {
	var (
		mu         sync.Mutex
		lastErr    error
		lastStatus int
	)
	d := disco.New()
	d.Transport = roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if err := ctx.Err(); err != nil {
			return nil, err // the leader gave up: make disco's remaining retries fail at once
		}
		if tok := c.token(host, req.URL); tok != "" {
			req = req.Clone(req.Context())
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := c.transport.RoundTrip(req)
		if err == nil {
			// disco's retrying client would sleep for as long as
			// Retry-After says; its own bounded backoff is enough.
			resp.Header.Del("Retry-After")
		}
		mu.Lock()
		if err != nil {
			lastErr, lastStatus = err, 0
		} else {
			lastErr, lastStatus = nil, resp.StatusCode
		}
		mu.Unlock()
		if err == nil {
			c.log.LogAttrs(ctx, slog.LevelDebug, "origin request", slog.String("op", OpDiscovery),
				slog.String("url", redactURL(req.URL)), slog.Int("status", resp.StatusCode))
		}
		return resp, err
	})

	type outcome struct {
		u   *url.URL
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		h, err := d.Discover(host)
		if err != nil {
			done <- outcome{err: err}
			return
		}
		u, err := h.ServiceURL(providersService)
		done <- outcome{u, err}
	}()

	originErr := func(err error) *OriginError {
		return &OriginError{Host: string(host), Op: OpDiscovery, Err: err}
	}
	var o outcome
	select {
	case o = <-done:
	case <-ctx.Done():
		return nil, originErr(&timeoutError{msg: fmt.Sprintf("no answer within %s", discoveryLeaderTimeout)})
	}

	var notProvided *disco.ErrServiceNotProvided
	var notSupported *disco.ErrVersionNotSupported
	switch {
	case o.err == nil:
	case errors.As(o.err, &notProvided), errors.As(o.err, &notSupported):
		return &discoEntry{noService: fmt.Errorf("%s: %w", host, ErrNoProviderService)}, nil
	default:
		mu.Lock()
		tErr, status := lastErr, lastStatus
		mu.Unlock()
		if tErr != nil {
			return nil, originErr(stripURL(tErr))
		}
		e := originErr(o.err)
		if status != http.StatusOK && status != http.StatusNotFound {
			e.StatusCode = status
		}
		return nil, e
	}
	if o.u.Scheme != "https" {
		return nil, originErr(fmt.Errorf("%s URL %q is not https", providersService, redactURL(o.u)))
	}
	return &discoEntry{providers: o.u}, nil
}
