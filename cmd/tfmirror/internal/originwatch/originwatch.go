// Package originwatch keeps the status page's origin rows
// (proxy.OriginHealth): for each allowed origin, its circuit breaker
// (read from the origin client), its last error with the cause in words
// naming the setting that helps, its last success, and the last hour's
// counts of client requests for its providers and modules, of downloads
// served from the cache, and of requests sent to it. The origin client
// tells it of each request's end (discovery.OriginWatcher); the front
// door's handler, wrapped by Watch.Count, of each client request.
//
// It owns that state and its bounds (a fixed number of one-minute
// buckets per allowed origin); it fetches nothing and decides nothing.
package originwatch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/proxy"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// Circuits reads an origin's circuit breaker without changing it
// (*discovery.Client implements it).
type Circuits interface {
	Circuit(origin string) discovery.Circuit
}

// Remembered reads how many of an origin's not-found answers the engine
// holds (mirror/notfound.Memory.Entries, by the origin's svchost
// comparison form).
type Remembered interface {
	Entries(origin svchost.Hostname) int
}

// originWindowMinutes is the sliding window of the counts, in one-minute
// buckets: an origin's counts take windowMinutes buckets, whatever the
// traffic.
const originWindowMinutes = 60

type originBucket struct {
	minute int64 // Unix minute the bucket counts; older ones are stale
	proxy.OriginCounts
}

type originState struct {
	lastSuccess time.Time
	lastError   *proxy.OriginFailure
	lastRefused *proxy.OriginFailure // the last package it answered that failed verification
	// proxyFault: lastError is the upstream proxy's, not the origin's.
	proxyFault bool
	buckets    [originWindowMinutes]originBucket
}

// add adds to the bucket of now's minute what f changes.
func (o *originState) add(now time.Time, f func(*proxy.OriginCounts)) {
	m := now.Unix() / 60
	b := &o.buckets[m%originWindowMinutes]
	if b.minute != m {
		*b = originBucket{minute: m}
	}
	f(&b.OriginCounts)
}

// lastHour sums the buckets of the hour before now.
func (o *originState) lastHour(now time.Time) proxy.OriginCounts {
	m := now.Unix() / 60
	var out proxy.OriginCounts
	for i := range o.buckets {
		b := &o.buckets[i]
		if b.minute > m-originWindowMinutes && b.minute <= m {
			out.Requests += b.Requests
			out.Downloads += b.Downloads
			out.CacheHits += b.CacheHits
			out.OriginRequests += b.OriginRequests
			out.OriginFailures += b.OriginFailures
			out.VerificationFailures += b.VerificationFailures
		}
	}
	return out
}

// Watch keeps the status page's origin rows: told of each origin
// request's end by the origin client (it is a discovery.OriginWatcher)
// and of each client request by Count. It keeps state for the allowed
// origins only, each a fixed number of buckets: its memory does not grow
// with traffic or with the names requests make up.
type Watch struct {
	circuits   Circuits
	remembered Remembered // nil: none counted
	now        func() time.Time
	order      []string // hosts, as given

	mu      sync.Mutex
	origins map[string]*originState
}

// New watches origins (host names as --allowed-origins gives
// them), reading their breakers from circuits and their not-found
// answers held from remembered (nil: none); now nil means time.Now.
func New(origins []string, circuits Circuits, remembered Remembered, now func() time.Time) (*Watch, error) {
	if circuits == nil {
		return nil, errors.New("originwatch: an origin watch needs the origins' circuit breakers")
	}
	if now == nil {
		now = time.Now
	}
	w := &Watch{circuits: circuits, remembered: remembered, now: now, origins: map[string]*originState{}}
	for _, o := range origins {
		// Either form: as given, or in comparison form (punycode).
		h, err := svchost.ForComparison(svchost.ForDisplay(o))
		if err != nil {
			return nil, fmt.Errorf("origin %q: %w", o, err)
		}
		if _, dup := w.origins[h.String()]; !dup {
			w.origins[h.String()] = &originState{}
			w.order = append(w.order, h.String())
		}
	}
	return w, nil
}

// OriginDone records the end of a request to origin (discovery's
// OriginWatcher): nil and not-found answers are successes; a caller's
// own cancellation says nothing of the origin, and a request the open
// circuit breaker refused was never sent: it is no origin request, and
// the error that opened the breaker stays the row's last error (the
// breaker's state is the row's too). Nor is a module package's fetch
// from the host its download location names (discovery.OpModuleSource):
// that host is the module publisher's choice on many registries, and its
// failures say nothing of the origin's health, as the circuit breaker
// has it too. A request the upstream proxy refused or failed
// (discovery.ProxyError.ProxyFault) never reached the origin either: it
// is no origin request, but it is the row's last error, marked as the
// proxy's.
func (w *Watch) OriginDone(origin, operation string, err error) {
	if operation == discovery.OpModuleSource {
		return
	}
	if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, discovery.ErrHostNotAllowed) ||
		errors.Is(err, discovery.ErrCircuitOpen)) {
		return
	}
	w.update(origin, func(o *originState, now time.Time) {
		failed := err != nil && !errors.Is(err, discovery.ErrNotFound)
		var pe *discovery.ProxyError
		proxyFault := failed && errors.As(err, &pe) && pe.ProxyFault()
		if !proxyFault {
			o.add(now, func(c *proxy.OriginCounts) {
				c.OriginRequests++
				if failed {
					c.OriginFailures++
				}
			})
		}
		if !failed {
			o.lastSuccess = now
			return
		}
		o.lastError = &proxy.OriginFailure{At: now, Cause: Cause(err, now), Error: err.Error()}
		o.proxyFault = proxyFault
	})
}

// update runs fn on the row of origin, under the lock, with the time
// now; not for an origin the page has no row of.
func (w *Watch) update(origin string, fn func(o *originState, now time.Time)) {
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if o := w.origins[origin]; o != nil {
		fn(o, now)
	}
}

// Refused records a provider package that origin answered and that
// failed verification for reason (a verify.Reason; the engine's
// mirror.Config.OriginRefused): its requests succeeded, and the row says
// what came of them.
func (w *Watch) Refused(origin, reason string) {
	w.update(origin, func(o *originState, now time.Time) {
		o.add(now, func(c *proxy.OriginCounts) { c.VerificationFailures++ })
		o.lastRefused = &proxy.OriginFailure{At: now, Cause: refusedCause(reason)}
	})
}

// refusedCause says in words why a package an origin answered was
// refused: never which package (the log says), as the page shows it to
// everyone.
func refusedCause(reason string) string {
	switch verify.Reason(reason) {
	case verify.ReasonSignature:
		return "a package's SHA256SUMS signature did not verify with the signing keys the origin names: nothing of it was served or cached"
	case verify.ReasonChecksum:
		return "a package's archive or answer did not match the sha256 its signed SHA256SUMS names: nothing of it was served or cached"
	}
	return "a package failed verification (" + reason + "): nothing of it was served or cached"
}

// Count wraps next (the mirror's handler) and counts each request for an
// allowed origin's providers and modules, by the origin host its path
// names: network mirror paths (/HOST/...) and the registry protocols'
// (/registry/HOST/...). A download is an answer that says whether it came
// from the cache (X-Tfmirror-Cache); a hit is one that did. A request is
// counted when its handler panics too: a download broken off after its
// status went out (http.ErrAbortHandler: a verification that failed as it
// streamed, a damaged cached copy) is one its client made, and got.
func (w *Watch) Count(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		defer w.count(rw, r)
		next.ServeHTTP(rw, r)
	})
}

// count counts the request r, answered through rw, on its origin's row.
func (w *Watch) count(rw http.ResponseWriter, r *http.Request) {
	host := proxy.OriginOfPath(r.URL.Path)
	if host == "" {
		return
	}
	cache := rw.Header().Get("X-Tfmirror-Cache")
	w.update(host, func(o *originState, now time.Time) {
		o.add(now, func(c *proxy.OriginCounts) {
			c.Requests++
			if cache != "" {
				c.Downloads++
			}
			if cache == "hit" {
				c.CacheHits++
			}
		})
	})
}

// Rows are the origins' rows now, in the order of the allowed origins.
func (w *Watch) Rows() []proxy.OriginHealth {
	now := w.now()
	out := make([]proxy.OriginHealth, 0, len(w.order))
	for _, host := range w.order {
		c := w.circuits.Circuit(host)
		w.mu.Lock()
		o := w.origins[host]
		row := proxy.OriginHealth{Host: host, Breaker: c.State, Failures: c.Failures, LastSuccess: o.lastSuccess, LastHour: o.lastHour(now)}
		if o.lastError != nil {
			e := *o.lastError
			row.LastError = &e
		}
		if o.lastRefused != nil {
			e := *o.lastRefused
			row.LastVerificationFailure = &e
		}
		proxyFault := o.proxyFault
		w.mu.Unlock()
		if c.State == "open" {
			row.RetryAt = c.RetryAt
		}
		if w.remembered != nil {
			row.NotFoundRemembered = w.remembered.Entries(svchost.Hostname(host))
		}
		switch {
		case c.State == "open":
			row.State = "unavailable"
		case row.LastError != nil && row.LastError.At.After(row.LastSuccess):
			row.State = "failing"
			if proxyFault {
				row.State = "proxy" // the request never reached the origin
			}
		case row.LastSuccess.IsZero():
			row.State = "unused"
		case row.LastHour.VerificationFailures > 0:
			row.State = "unverified" // it answers, and its answers are refused
		default:
			row.State = "ok"
		}
		out = append(out, row)
	}
	return out
}

// upstreamProxy begins a cause that is the upstream proxy's: named by the
// settings that choose it, never by its address, which the status page
// would show to everyone.
const upstreamProxy = discovery.UpstreamProxyNamed + " "

// Cause says why a request to an origin failed, in words an
// operator acts on, naming the setting that helps where one does. It
// never repeats what the error says of the request (a provider, a module,
// a URL), nor the upstream proxy's address or host name: the status page
// shows the cause to everyone, and the configuration only to a client
// with a token.
func Cause(err error, now time.Time) string {
	var (
		unknownCA  x509.UnknownAuthorityError
		hostname   x509.HostnameError
		invalid    x509.CertificateInvalidError
		certVerify *tls.CertificateVerificationError
		recordErr  tls.RecordHeaderError
		dnsErr     *net.DNSError
		opErr      *net.OpError
		open       *discovery.CircuitOpenError
		oe         *discovery.OriginError
		proxyErr   *discovery.ProxyError
		certErr    *discovery.CertificateError
	)
	switch {
	case errors.As(err, &certErr) && certErr.Proxy:
		// The proxy's own certificate (an https:// proxy URL), not the
		// origin's: the request never reached the origin.
		return upstreamProxy + "presents a TLS certificate the mirror does not trust: " + certErr.Cause + "; set origin_ca_file to its CA"
	case errors.As(err, &proxyErr) && proxyErr.Unreachable != "":
		return upstreamProxy + proxyFailure(err)
	case errors.As(err, &proxyErr) && proxyErr.Broken != "" && proxyErr.Connect:
		return upstreamProxy + "broke the HTTP protocol (" + proxyErr.Broken + "): check that upstream_proxy or HTTPS_PROXY names an HTTP proxy, and the proxy's health"
	case errors.As(err, &proxyErr) && proxyErr.Broken != "":
		return upstreamProxy + "broke the SOCKS5 protocol (" + proxyErr.Broken + "): check that upstream_proxy names a SOCKS5 proxy, and the proxy's health"
	case errors.As(err, &proxyErr):
		// Not the error's own words, which name the origin's host and port.
		code := "(HTTP " + proxyErr.Status() + ")"
		if proxyErr.SOCKS != "" {
			code = "(" + proxyErr.Status() + ")"
		}
		switch {
		case proxyErr.Credentials():
			return upstreamProxy + "refused the mirror's credentials " + code + ": check the user and password of its URL"
		case proxyErr.Policy():
			return upstreamProxy + "refused to connect to the origin " + code + ": its policy does not allow this host"
		}
		return upstreamProxy + "could not connect to the origin " + code
	case errors.As(err, &opErr) && opErr.Op == "proxyconnect":
		// Before the causes below, which would name the proxy's host as
		// the origin's; and not in the error's own words, which name its
		// address and port: the row names the proxy by its settings.
		return upstreamProxy + proxyFailure(opErr.Err)
	case errors.As(err, &open):
		if open.RetryAfter > 0 {
			return fmt.Sprintf("circuit breaker open after %d failures in a row: requests fail fast until %s", open.Failures, now.Add(open.RetryAfter).UTC().Format("15:04:05 UTC"))
		}
		return fmt.Sprintf("circuit breaker open after %d failures in a row: a probe request is under way", open.Failures)
	case errors.As(err, &unknownCA):
		return "certificate signed by unknown authority: the origin's certificate (or that of a TLS-inspecting proxy on the way) is not signed by a CA the mirror trusts; set origin_ca_file to the proxy's CA"
	case errors.As(err, &hostname):
		return "certificate is not valid for the origin's host name (" + hostname.Host + "): a TLS-inspecting proxy that signs the wrong name, or the wrong host"
	case errors.As(err, &invalid):
		return "certificate invalid: " + invalid.Error()
	case errors.As(err, &certVerify):
		return "certificate not trusted: " + certVerify.Error()
	case errors.As(err, &recordErr):
		return "not TLS: the origin's port (or the proxy) answered something else than TLS"
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return "DNS: the host name " + dnsErr.Name + " does not resolve"
		}
		if dnsErr.IsTimeout {
			return "DNS: the lookup of " + dnsErr.Name + " timed out"
		}
		if !plainWords(dnsErr.Err) {
			// The resolver's socket error ("read udp ADDR->SERVER:53:
			// ..."), which names the mirror's address and the DNS
			// server's: not for everyone.
			return "DNS: the lookup of " + dnsErr.Name + " failed; the row's error says how"
		}
		return "DNS: the lookup of " + dnsErr.Name + " failed: " + dnsErr.Err
	case errors.Is(err, discovery.ErrPrivateAddress):
		return "refused: the origin resolves to a private address (allow_private_origins allows it)"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused: nothing listens on the origin's port, or a firewall rejects it"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset by the origin or a proxy on the way"
	case errors.As(err, &oe) && oe.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return "timeout: no complete answer in time"
	case errors.As(err, &oe) && oe.StatusCode > 0:
		return fmt.Sprintf("the origin answered HTTP %d %s", oe.StatusCode, http.StatusText(oe.StatusCode))
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout: no complete answer in time"
	}
	// Not the error's own words: they may name a provider, a module or a
	// URL, which the status page shows only to a client with a token (in
	// the row's error), while the cause is shown to everyone.
	return "the request failed; its error says how"
}

// plainWords reports whether s is words only (letters, spaces, hyphens
// and apostrophes), as the resolvers' own sentences are ("server
// misbehaving"): no address, port or path.
func plainWords(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !unicode.IsLetter(r) && r != ' ' && r != '-' && r != '\''
	})
}

// proxyFailure says how the upstream proxy failed, naming neither its
// address nor its host name.
func proxyFailure(err error) string {
	var dnsErr *net.DNSError
	var ne net.Error
	switch {
	case errors.As(err, &dnsErr):
		return "could not be reached: its host name does not resolve"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused the connection: nothing listens on its port, or a firewall rejects it"
	case errors.As(err, &ne) && ne.Timeout():
		return "did not answer in time"
	}
	return "could not be reached or refused the connection; the row's error says how"
}
