package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/redact"
)

// ErrCircuitOpen means a request was not sent because the origin's circuit
// breaker is open: the origin failed too many times in a row and is left
// alone until its cooldown has passed. It is returned wrapped in an
// *OriginError.
var ErrCircuitOpen = errors.New("origin circuit breaker is open (the origin keeps failing)")

// CircuitOpenError is the error behind ErrCircuitOpen (errors.Is matches
// it): how many failures opened the circuit and when to try again.
type CircuitOpenError struct {
	// Failures is the number of consecutive failed attempts.
	Failures int
	// RetryAfter is how long until the breaker lets a probe request
	// through; 0 when a probe is already under way.
	RetryAfter time.Duration
}

func (e *CircuitOpenError) Error() string {
	if e.RetryAfter > 0 {
		// Whole seconds rounded up, as the answer's Retry-After gives it.
		return fmt.Sprintf("%v: %d consecutive failures; next attempt in %s",
			ErrCircuitOpen, e.Failures, (e.RetryAfter + time.Second - 1).Truncate(time.Second))
	}
	return fmt.Sprintf("%v: %d consecutive failures; a probe request is under way", ErrCircuitOpen, e.Failures)
}

// Is makes errors.Is(err, ErrCircuitOpen) true.
func (e *CircuitOpenError) Is(target error) bool { return target == ErrCircuitOpen }

// CircuitObserver is the part of an Observer that is told
// when an origin's circuit breaker opens (open=true, including the
// half-open probe phase) and closes again.
type CircuitObserver interface {
	CircuitOpen(origin string, open bool)
}

// StaleObserver is the part of an Observer that counts stale
// answers: StaleServed("discovery") is called when a discovery refresh
// failed and the previous result is used instead.
type StaleObserver interface {
	StaleServed(kind string)
}

// outcome of one attempt, as the breaker sees it.
type attemptResult int

const (
	attemptNeutral attemptResult = iota // says nothing about the origin's health (policy refusal, caller gave up)
	attemptOK
	attemptFailed
)

// redirectRefused is a redirect that checkRedirect refused: a policy
// decision, not an origin failure, and never worth a retry.
type redirectRefused struct {
	msg string
	err error // what refused it, if an error did
}

func (e *redirectRefused) Error() string { return e.msg }
func (e *redirectRefused) Unwrap() error { return e.err }

// classify judges the result of one request: whether it tells of a failing
// origin, and whether it is worth retrying. Connection failures, timeouts,
// 429 and 5xx other than 501 are failures and retried; refusals by the
// network policy, certificates the client does not trust and an upstream
// proxy's refusal of the mirror's credentials or of the host (the
// operator's to fix: see CertificateError and ProxyError) and the
// caller's own cancellation are neither. An upstream proxy's break of
// its protocol is the proxy's failure: retried, but not the origin's.
// An upstream proxy that cannot be reached is a failure of every host
// behind it: retried, and counted.
func classify(ctx context.Context, resp *http.Response, err error) (attemptResult, bool) {
	if err != nil {
		var rr *redirectRefused
		var pe *ProxyError
		switch {
		case errors.As(err, &pe) && pe.operatorsToFix(),
			ctx.Err() != nil,
			errors.Is(err, ErrPrivateAddress),
			errors.Is(err, errNotHTTPS),
			errors.Is(err, ErrCircuitOpen),
			errors.Is(err, ErrUntrustedCertificate),
			errors.As(err, &rr):
			return attemptNeutral, false
		case errors.As(err, &pe) && pe.Unreachable != "":
			// The proxy not reached is as the network down: every
			// host's breaker counts it, so that the mirror answers
			// at once from what it holds meanwhile (a proxy that does
			// not answer would hold each request for all its
			// attempts).
			return attemptFailed, true
		case errors.As(err, &pe) && pe.ProxyFault():
			return attemptNeutral, true
		}
		return attemptFailed, true
	}
	if retryableStatus(resp.StatusCode) {
		return attemptFailed, true
	}
	return attemptOK, false
}

func retryableStatus(code int) bool {
	return code == http.StatusTooManyRequests || (code >= 500 && code != http.StatusNotImplemented)
}

// retryAfter parses a Retry-After header (seconds or an HTTP date); ok is
// false when there is none or it does not parse.
func retryAfter(h string, now time.Time) (time.Duration, bool) {
	if h == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(h, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		switch {
		case s < 0:
			return 0, false
		case s > int64(math.MaxInt64/time.Second):
			// Longer than a Duration holds (ParseInt gives MaxInt64 for
			// a number longer still): as long as any, never a wrapped,
			// short or negative wait.
			return time.Duration(math.MaxInt64), true
		}
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// backoff is the wait before retry number n (0-based): exponential from
// RetryBaseDelay, capped at RetryMaxDelay, with jitter over its upper half.
func (t *transport) backoff(n int) time.Duration {
	d := t.retryBaseDelay << min(n, 20)
	if d <= 0 || d > t.retryMaxDelay {
		d = t.retryMaxDelay
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// sleep waits for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// send sends the idempotent GET r, retrying connection failures, timeouts,
// 429 and 5xx answers up to Config.Retries times with backoff and jitter
// (a Retry-After up to Config.RetryAfterMax is obeyed; a longer one ends
// the retries). Each attempt runs on a request context made by begin; the
// returned end releases the last one and must be called once the response
// body is done with. The response returned may have any status; the
// caller judges it. The origin's circuit breaker is consulted before each
// attempt and told of its outcome.
func (t *transport) send(ctx context.Context, r request, begin func() (context.Context, func())) (*http.Response, context.Context, func(), error) {
	host := string(r.p.Hostname)
	// A module's source host is the one its download location names (on
	// many registries, the module's publisher's choice), not the origin:
	// its failures say nothing of the origin's health, and must not open
	// the origin's circuit for its providers and modules (Git sources,
	// through SourceHTTPClient, never reach the breaker either).
	breaker := r.op != OpModuleSource
	for n := 0; ; n++ {
		var probe bool
		if breaker {
			var err error
			if probe, err = t.breaker.allow(host); err != nil {
				return nil, nil, nil, originError(r, 0, err)
			}
		}
		reqCtx, end := begin()
		resp, err := t.do(ctx, reqCtx, r)
		if err == nil && reqCtx.Err() != nil && ctx.Err() == nil {
			// The answer came as the attempt's time ran out (net/http
			// can hand out a response whose request was canceled as it
			// arrived; the origin may even have written it because the
			// cancellation closed the connection): its body cannot be
			// read in time, so the attempt is a timeout, retried as one.
			drain(resp.Body)
			resp, err = nil, originError(r, 0, causeOf(reqCtx, reqCtx.Err()))
		}
		res, retry := classify(ctx, resp, err)
		if breaker && t.breaker.record(host, probe, res) {
			retry = false // this failure opened the circuit: report it, not the open circuit
		}
		var wait time.Duration
		if retry && n < t.retries {
			wait = t.backoff(n)
			if resp != nil {
				if ra, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
					if ra > t.retryAfterMax {
						retry = false
					}
					wait = ra
				}
			}
		}
		if !retry || n >= t.retries {
			if err != nil {
				end()
				return nil, nil, nil, err
			}
			return resp, reqCtx, end, nil
		}
		if resp != nil {
			drain(resp.Body)
		}
		end()
		what := "error"
		if resp != nil {
			what = statusText(resp.StatusCode)
		} else if err != nil {
			what = err.Error()
		}
		t.log.LogAttrs(ctx, slog.LevelWarn, "origin request failed; retrying",
			slog.String("origin", host), slog.String("op", r.op), slog.String("url", redact.URL(r.u)),
			slog.String("failure", what), slog.Int("attempt", n+1), slog.Duration("wait", wait))
		if err := t.sleep(ctx, wait); err != nil {
			return nil, nil, nil, fmt.Errorf("%s %s for %s: %w", r.op, redact.URL(r.u), r.p, err)
		}
	}
}

// breakerState of one origin.
type circuitState int

const (
	circuitClosed circuitState = iota
	circuitOpen
	circuitHalfOpen
)

type circuit struct {
	state    circuitState
	failures int // consecutive
	openedAt time.Time
	probing  bool // half-open: the one probe request is under way
}

// breaker is a per-origin circuit breaker: after Threshold consecutive
// failures an origin's circuit opens and requests fail fast with
// ErrCircuitOpen for Cooldown; then one probe request is let through
// (half-open). Its success closes the circuit, its failure opens it again.
type breaker struct {
	threshold int // <= 0 disables the breaker
	cooldown  time.Duration
	now       func() time.Time
	notify    func(origin string, open bool)

	mu    sync.Mutex
	hosts map[string]*circuit
}

func (b *breaker) allow(host string) (probe bool, err error) {
	if b.threshold <= 0 {
		return false, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.hosts[host]
	if c == nil {
		return false, nil
	}
	switch c.state {
	case circuitClosed:
		return false, nil
	case circuitOpen:
		if wait := b.cooldown - b.now().Sub(c.openedAt); wait > 0 {
			return false, &CircuitOpenError{Failures: c.failures, RetryAfter: wait}
		}
		c.state = circuitHalfOpen
	}
	if c.probing {
		return false, &CircuitOpenError{Failures: c.failures}
	}
	c.probing = true
	return true, nil
}

// record counts the outcome of an attempt; it reports whether the circuit
// is now open.
func (b *breaker) record(host string, probe bool, res attemptResult) bool {
	if b.threshold <= 0 {
		return false
	}
	b.mu.Lock()
	c := b.hosts[host]
	if c == nil {
		if res != attemptFailed {
			b.mu.Unlock()
			return false
		}
		c = &circuit{}
		b.hosts[host] = c
	}
	if probe {
		c.probing = false
	}
	changed, open := false, false
	switch res {
	case attemptOK:
		changed = c.state != circuitClosed
		c.state, c.failures = circuitClosed, 0
	case attemptFailed:
		c.failures++
		if (c.state == circuitHalfOpen && probe) || (c.state == circuitClosed && c.failures >= b.threshold) {
			changed, open = c.state == circuitClosed, true
			c.state, c.openedAt = circuitOpen, b.now()
		}
	}
	nowOpen := c.state == circuitOpen
	b.mu.Unlock()
	if changed && b.notify != nil {
		b.notify(host, open)
	}
	return nowOpen
}

// Circuit is a read-only snapshot of one origin's circuit breaker.
type Circuit struct {
	// State is "closed" (requests go through), "open" (they fail fast
	// until RetryAt) or "half-open" (one probe request may go through).
	State string
	// Failures is the number of consecutive failed attempts.
	Failures int
	// RetryAt is when an open circuit lets a probe through.
	RetryAt time.Time
	// Probing says a half-open circuit's one probe request is under way:
	// other requests fail fast until it ends.
	Probing bool
}

// FailsFast reports whether a request to the origin would fail fast
// (ErrCircuitOpen) now: the circuit is open, or half-open with its probe
// under way. Once the cooldown has passed, with no request since, it
// does not: the next request is the probe.
func (c Circuit) FailsFast() bool { return c.State == "open" || c.Probing }

// Circuit is the state of origin's circuit breaker now; "closed" for an
// origin not yet contacted, or with the breaker disabled.
func (c *Client) Circuit(origin string) Circuit { return c.tr.breaker.snapshot(origin) }

func (b *breaker) snapshot(host string) Circuit {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.hosts[host]
	if c == nil {
		return Circuit{State: "closed"}
	}
	out := Circuit{State: "closed", Failures: c.failures}
	switch c.state {
	case circuitOpen:
		out.State, out.RetryAt = "open", c.openedAt.Add(b.cooldown)
		if !b.now().Before(out.RetryAt) {
			out.State = "half-open" // the next request is the probe
		}
	case circuitHalfOpen:
		out.State, out.Probing = "half-open", c.probing
	}
	return out
}

// logCircuit logs circuit changes, an open circuit with its cooldown,
// before passing them on to next.
func logCircuit(log *slog.Logger, cooldown time.Duration, next func(string, bool)) func(string, bool) {
	return func(origin string, open bool) {
		if open {
			log.Warn("origin keeps failing; circuit breaker opened, requests to it fail fast",
				"origin", origin, "cooldown", cooldown.String())
		} else {
			log.Info("origin answers again; circuit breaker closed", "origin", origin)
		}
		if next != nil {
			next(origin, open)
		}
	}
}

// MaxRequestTime is the longest one service discovery, registry JSON,
// SHA256SUMS or signature request can take, its retries included:
// Retries+1 attempts of at most RequestTimeout each (connecting and reading
// the body included) and, between them, waits of at most the larger of
// RetryMaxDelay and RetryAfterMax. With the defaults: 3 x 30s + 2 x 10s =
// 1m50s. Archive downloads have no such bound (see OpenArchive).
func (c *Client) MaxRequestTime() time.Duration { return c.tr.maxRequestTime() }

func (t *transport) maxRequestTime() time.Duration {
	wait := max(t.retryMaxDelay, t.retryAfterMax)
	return time.Duration(t.retries+1)*t.requestTimeout + time.Duration(t.retries)*wait
}

// requestContext makes the per-attempt context of a metadata request: it
// ends after Config.RequestTimeout, body included.
func (t *transport) requestContext(ctx context.Context) func() (context.Context, func()) {
	return func() (context.Context, func()) {
		return context.WithTimeoutCause(ctx, t.requestTimeout,
			&timeoutError{msg: fmt.Sprintf("no complete answer within %s", t.requestTimeout)})
	}
}
