package proxy

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

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/discovery"
)

// The status page's origin rows: per allowed origin, its circuit breaker,
// its last error with the cause in words, its last success, and what the
// last hour brought (client requests for its providers and modules, the
// downloads among them served from the cache, the requests sent to it).

// OriginCircuits reads an origin's circuit breaker without changing it
// (*discovery.Client implements it).
type OriginCircuits interface {
	Circuit(origin string) discovery.Circuit
}

// OriginHealth is one origin's row on the status page.
type OriginHealth struct {
	Host string `json:"host"`
	// State sums the row up: "ok" (its last request succeeded), "failing"
	// (its last request failed), "unavailable" (its circuit breaker is
	// open: requests fail fast) or "unused" (not contacted since start).
	State string `json:"state"`
	// Breaker is the circuit breaker's state: closed, open or half-open;
	// Failures the consecutive failed attempts; RetryAt, while open, when
	// the next request is let through.
	Breaker  string    `json:"breaker"`
	Failures int       `json:"consecutive_failures,omitempty"`
	RetryAt  time.Time `json:"retry_at,omitzero"`
	// LastSuccess is when a request to it last succeeded (a not-found
	// answer is one); LastError its last failure.
	LastSuccess time.Time      `json:"last_success,omitzero"`
	LastError   *OriginFailure `json:"last_error,omitempty"`
	// LastHour counts the last hour.
	LastHour OriginCounts `json:"last_hour"`
}

// OriginFailure is an origin's last failed request.
type OriginFailure struct {
	At time.Time `json:"at"`
	// Cause is the failure in words, with what to do about it when the
	// mirror's configuration can help ("certificate signed by unknown
	// authority: ... set origin_ca_file").
	Cause string `json:"cause"`
	// Error is the error as the log has it; left out of the page when
	// client authentication hides the provider lists (it may name a
	// provider).
	Error string `json:"error,omitempty"`
}

// OriginCounts are an origin's counts over the last hour.
type OriginCounts struct {
	// Requests are the clients' requests for its providers and modules
	// (network mirror and registry protocols); Downloads those for an
	// archive or module package, CacheHits the downloads served from the
	// cache without asking the origin.
	Requests  int64 `json:"requests"`
	Downloads int64 `json:"downloads"`
	CacheHits int64 `json:"cache_hits"`
	// OriginRequests are the requests the mirror sent to the origin (after
	// retries, one per operation); OriginFailures those that failed.
	OriginRequests int64 `json:"origin_requests"`
	OriginFailures int64 `json:"origin_failures"`
}

// originWindowMinutes is the sliding window of the counts, in one-minute
// buckets: an origin's counts take windowMinutes buckets, whatever the
// traffic.
const originWindowMinutes = 60

type originBucket struct {
	minute int64 // Unix minute the bucket counts; older ones are stale
	OriginCounts
}

type originState struct {
	lastSuccess time.Time
	lastError   *OriginFailure
	buckets     [originWindowMinutes]originBucket
}

// add adds to the bucket of now's minute what f changes.
func (o *originState) add(now time.Time, f func(*OriginCounts)) {
	m := now.Unix() / 60
	b := &o.buckets[m%originWindowMinutes]
	if b.minute != m {
		*b = originBucket{minute: m}
	}
	f(&b.OriginCounts)
}

// lastHour sums the buckets of the hour before now.
func (o *originState) lastHour(now time.Time) OriginCounts {
	m := now.Unix() / 60
	var out OriginCounts
	for i := range o.buckets {
		b := &o.buckets[i]
		if b.minute > m-originWindowMinutes && b.minute <= m {
			out.Requests += b.Requests
			out.Downloads += b.Downloads
			out.CacheHits += b.CacheHits
			out.OriginRequests += b.OriginRequests
			out.OriginFailures += b.OriginFailures
		}
	}
	return out
}

// OriginWatch keeps the status page's origin rows: told of each origin
// request's end by the origin client (it is a discovery.OriginWatcher)
// and of each client request by Count. It keeps state for the allowed
// origins only, each a fixed number of buckets: its memory does not grow
// with traffic or with the names requests make up.
type OriginWatch struct {
	circuits OriginCircuits
	now      func() time.Time
	order    []string // hosts, as given

	mu      sync.Mutex
	origins map[string]*originState
}

// NewOriginWatch watches origins (host names as --allowed-origins gives
// them), reading their breakers from circuits; now nil means time.Now.
func NewOriginWatch(origins []string, circuits OriginCircuits, now func() time.Time) (*OriginWatch, error) {
	if circuits == nil {
		return nil, errors.New("proxy: an origin watch needs the origins' circuit breakers")
	}
	if now == nil {
		now = time.Now
	}
	w := &OriginWatch{circuits: circuits, now: now, origins: map[string]*originState{}}
	for _, o := range origins {
		h, err := svchost.ForComparison(o)
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
// own cancellation says nothing of the origin.
func (w *OriginWatch) OriginDone(origin, _ string, err error) {
	if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, discovery.ErrHostNotAllowed)) {
		return
	}
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	o := w.origins[origin]
	if o == nil {
		return
	}
	failed := err != nil && !errors.Is(err, discovery.ErrNotFound)
	o.add(now, func(c *OriginCounts) {
		c.OriginRequests++
		if failed {
			c.OriginFailures++
		}
	})
	if !failed {
		o.lastSuccess = now
		return
	}
	o.lastError = &OriginFailure{At: now, Cause: FailureCause(err, now), Error: err.Error()}
}

// Count wraps next (the mirror's handler) and counts each request for an
// allowed origin's providers and modules, by the origin host its path
// names: network mirror paths (/HOST/...) and the registry protocols'
// (/registry/HOST/...). A download is an answer that says whether it came
// from the cache (X-Tfmirror-Cache); a hit is one that did.
func (w *OriginWatch) Count(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(rw, r)
		host := originOfPath(r.URL.Path)
		if host == "" {
			return
		}
		cache := firstValue(rw.Header(), "X-Tfmirror-Cache")
		now := w.now()
		w.mu.Lock()
		defer w.mu.Unlock()
		o := w.origins[host]
		if o == nil {
			return
		}
		o.add(now, func(c *OriginCounts) {
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

// originOfPath is the origin host a request path of the network mirror or
// registry protocols names, lower case; "" for any other path.
func originOfPath(path string) string {
	switch Route(path) {
	case "index", "version", "archive":
		host, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
		return strings.ToLower(host)
	case "registry_versions", "registry_download", "registry_shasums", "registry_signature",
		"module_versions", "module_download", "module_package":
		rest := strings.TrimPrefix(path, "/"+registryRoot+"/")
		host, _, _ := strings.Cut(rest, "/")
		return strings.ToLower(host)
	}
	return ""
}

// Rows are the origins' rows now, in the order of the allowed origins.
func (w *OriginWatch) Rows() []OriginHealth {
	now := w.now()
	out := make([]OriginHealth, 0, len(w.order))
	for _, host := range w.order {
		c := w.circuits.Circuit(host)
		w.mu.Lock()
		o := w.origins[host]
		row := OriginHealth{Host: host, Breaker: c.State, Failures: c.Failures, LastSuccess: o.lastSuccess, LastHour: o.lastHour(now)}
		if o.lastError != nil {
			e := *o.lastError
			row.LastError = &e
		}
		w.mu.Unlock()
		if c.State == "open" {
			row.RetryAt = c.RetryAt
		}
		switch {
		case c.State == "open":
			row.State = "unavailable"
		case row.LastError != nil && row.LastError.At.After(row.LastSuccess):
			row.State = "failing"
		case row.LastSuccess.IsZero():
			row.State = "unused"
		default:
			row.State = "ok"
		}
		out = append(out, row)
	}
	return out
}

// originTrouble is the health block's line on the origins that fail, ""
// when none does.
func originTrouble(rows []OriginHealth) string {
	var failing []string
	for _, r := range rows {
		if r.State == "failing" || r.State == "unavailable" {
			failing = append(failing, r.Host)
		}
	}
	switch {
	case len(failing) == 0:
		return ""
	case len(failing) == 1:
		return fmt.Sprintf("%s is failing (below)", failing[0])
	}
	return fmt.Sprintf("%d of %d origins are failing (below)", len(failing), len(rows))
}

// originStateText and originStateClass show an OriginHealth.State.
func originStateText(state string) string {
	switch state {
	case "ok":
		return "answering"
	case "unused":
		return "not contacted yet"
	case "unknown":
		return "not watched"
	}
	return state
}

func originStateClass(state string) string {
	switch state {
	case "ok":
		return "ok"
	case "failing", "unavailable":
		return "bad"
	}
	return "muted"
}

// agoText says how long before now t was: "12 s ago", "3 min ago",
// "5 h ago", "2 d ago".
func agoText(t, now time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%d s ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d.Hours()))
	}
	return fmt.Sprintf("%d d ago", int(d.Hours()/24))
}

// FailureCause says why a request to an origin failed, in words an
// operator acts on, naming the setting that helps where one does.
func FailureCause(err error, now time.Time) string {
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
	)
	switch {
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
		return "DNS: the lookup of " + dnsErr.Name + " failed: " + dnsErr.Err
	case errors.Is(err, discovery.ErrPrivateAddress):
		return "refused: the origin resolves to a private address (allow_private_origins allows it)"
	case errors.As(err, &opErr) && opErr.Op == "proxyconnect":
		return "the upstream proxy (upstream_proxy, HTTPS_PROXY) could not be reached or refused the connection: " + opErr.Err.Error()
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
	return "error: " + err.Error()
}
