package proxy

// Failed authentication attempts, limited per client address: every
// credential Auth refuses (a client token, a token the OCI door issued,
// an archive URL's signature) is counted against the address it came
// from, and an address over the limit is answered 429 before any
// credential of it is checked (Auth.Limit, in front of every door).

import (
	"container/list"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/tfmirror/tfmirror/v2/internal/logbound"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
)

// The limit of failed authentication attempts per client address: a
// burst of AuthFailureBurst, then AuthFailureRate a second. A client
// that sends a wrong or stale token now and then never meets it; a
// guesser gets AuthFailureBurst tries, then one a second.
const (
	AuthFailureBurst = 20
	AuthFailureRate  = rate.Limit(1)
)

// maxTrackedClients bounds the addresses whose failures are remembered.
// The one whose last failure is oldest is forgotten first: after
// AuthFailureBurst/AuthFailureRate seconds without a failure an address
// is back to a full budget, so forgetting it changes nothing unless that
// many addresses failed within those seconds.
const maxTrackedClients = 16384

// Failure kinds, the label of AuthMetrics.AuthFailed.
const (
	FailureToken     = "token"     // a client token (Bearer, or a Basic password)
	FailureIssued    = "issued"    // a token claiming to be one the OCI door issued
	FailureSignature = "signature" // an archive URL's signature that does not verify
)

// failureKinds are the failure kinds, in the order of Auth.failed.
var failureKinds = [...]string{FailureToken, FailureIssued, FailureSignature}

// AuthLimitStatus is the state of the limit of failed authentication
// attempts, for the status page: counts only, no address.
type AuthLimitStatus struct {
	// FailedAttempts are the credentials refused since start, by kind
	// (FailureToken, FailureIssued, FailureSignature), every kind present.
	FailedAttempts map[string]uint64 `json:"failed_attempts"`
	// FailedTotal is their sum, for the HTML page.
	FailedTotal uint64 `json:"-"`
	// ClientsOverLimit is how many client addresses (IPv6 by /64) are
	// over the limit now: their credentials are answered 429.
	ClientsOverLimit int `json:"clients_over_limit"`
	// TrustedProxyRanges is how many ranges of trusted proxies are
	// configured (Config.TrustedProxyRanges); 0: the clients are counted
	// by their connections' peers.
	TrustedProxyRanges int `json:"trusted_proxy_ranges"`
}

// limitStatus is the state of the limit as of now.
func (a *Auth) limitStatus(trustedRanges int) *AuthLimitStatus {
	st := &AuthLimitStatus{FailedAttempts: make(map[string]uint64, len(failureKinds)),
		ClientsOverLimit: a.limit.overLimit(a.now()), TrustedProxyRanges: trustedRanges}
	for i, kind := range failureKinds {
		n := a.failed[i].Load()
		st.FailedAttempts[kind] = n
		st.FailedTotal += n
	}
	return st
}

// AuthMetrics counts what client authentication refuses. Package metrics
// implements it.
type AuthMetrics interface {
	// AuthFailed counts a credential refused, by kind (FailureToken,
	// FailureIssued, FailureSignature).
	AuthFailed(kind string)
	// AuthLimited counts a request answered 429 because its client
	// address failed authentication too often.
	AuthLimited()
}

// failureLimiter is the failed-attempts budget of each client address,
// for a bounded number of addresses. Safe for concurrent use.
type failureLimiter struct {
	mu      sync.Mutex
	clients map[netip.Prefix]*list.Element // of *clientFailures
	order   list.List                      // most recent failure first
	max     int

	warns     *logbound.Warnings // of the failures logged
	limitWarn *logbound.Warnings // of the addresses going over the limit
}

type clientFailures struct {
	key netip.Prefix
	lim *rate.Limiter
}

// waitAt returns how long c's address must wait at now before a
// credential of it is checked again (until its limiter has a whole
// token), and whether it must wait at all.
func (c *clientFailures) waitAt(now time.Time) (time.Duration, bool) {
	tokens := c.lim.TokensAt(now)
	if tokens >= 1 {
		return 0, false
	}
	secs := (1 - tokens) / float64(AuthFailureRate)
	return time.Duration(math.Ceil(secs * float64(time.Second))), true
}

func newFailureLimiter(max int) *failureLimiter {
	return &failureLimiter{clients: make(map[netip.Prefix]*list.Element), max: max,
		warns:     logbound.New(failureWarnRate, failureWarnBurst, "failures_logged_at_debug"),
		limitWarn: logbound.New(limitWarnRate, limitWarnBurst, "")}
}

// At most failureWarnBurst failures logged at warn at once, then
// failureWarnRate a second; the others at debug, their number on the next
// warning.
const (
	failureWarnRate  = rate.Limit(1)
	failureWarnBurst = 20
)

// At most limitWarnBurst addresses going over the limit are logged at
// warn at once, then one every 10 seconds; the others at debug.
const (
	limitWarnRate  = rate.Limit(0.1)
	limitWarnBurst = 5
)

// clientKey is the address a request is counted against: its client
// address (ClientAddr: the connection's peer, or the client a trusted
// proxy names), an IPv4 address alone, an IPv6 address by its /64 (one
// host usually holds the whole /64). A peer that is not an IP address (a
// Unix socket) is the zero prefix.
func clientKey(r *http.Request) netip.Prefix {
	addr, ok := ClientAddr(r)
	if !ok {
		return netip.Prefix{}
	}
	bits := 32
	if addr.Is6() {
		bits = 64
	}
	p, _ := addr.Prefix(bits)
	return p
}

// wait returns how long key must wait before a credential of it is
// checked again, and whether it must wait at all.
func (l *failureLimiter) wait(key netip.Prefix, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.clients[key]
	if !ok {
		return 0, false
	}
	return e.Value.(*clientFailures).waitAt(now)
}

// fail counts a failure of key at now and reports whether key is now over
// the limit, and whether this failure put it over (newly). Failures
// beyond the burst are counted as debt, so that a burst of concurrent
// guesses, all checked before the first was counted, keeps its address
// waiting for as long as it took more than its budget.
func (l *failureLimiter) fail(key netip.Prefix, now time.Time) (over, newly bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var c *clientFailures
	if e, ok := l.clients[key]; ok {
		c = e.Value.(*clientFailures)
		l.order.MoveToFront(e)
	} else {
		if l.order.Len() >= l.max {
			oldest := l.order.Back()
			l.order.Remove(oldest)
			delete(l.clients, oldest.Value.(*clientFailures).key)
		}
		c = &clientFailures{key: key, lim: rate.NewLimiter(AuthFailureRate, AuthFailureBurst)}
		l.clients[key] = l.order.PushFront(c)
	}
	_, was := c.waitAt(now)
	c.lim.ReserveN(now, 1)
	_, over = c.waitAt(now)
	return over, over && !was
}

// overLimit counts the addresses over the limit at now: one pass over
// the addresses remembered (at most max), asking each one's limiter.
func (l *failureLimiter) overLimit(now time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for e := l.order.Front(); e != nil; e = e.Next() {
		if _, over := e.Value.(*clientFailures).waitAt(now); over {
			n++
		}
	}
	return n
}

// logFailure logs a refused credential, within the warnings' bound.
func (l *failureLimiter) logFailure(log *slog.Logger, now time.Time, args ...any) {
	l.warns.Log(log, now, "client authentication failed", args...)
}

// logLimited logs that a client address went over the limit: once each
// time it does, at warn within the bound of limitWarnBurst, then
// limitWarnRate; at debug beyond.
func (l *failureLimiter) logLimited(log *slog.Logger, now time.Time, msg string, args ...any) {
	l.limitWarn.Log(log, now, msg, args...)
}

// checked is the end of every check of a credential of r: ok says
// whether the credential was accepted. A refused one is counted against
// r's client address, logged within bounds and counted in the metrics;
// an accepted one from an address over the limit is refused all the same
// (it was checked in a race with the failures that put it over), so that
// no guess is ever accepted beyond the budget.
func (a *Auth) checked(r *http.Request, kind string, ok bool) bool {
	key, now := clientKey(r), a.now()
	if ok {
		_, over := a.limit.wait(key, now)
		return !over
	}
	over, newly := a.limit.fail(key, now)
	if i := slices.Index(failureKinds[:], kind); i >= 0 {
		a.failed[i].Add(1)
	}
	if a.metrics != nil {
		a.metrics.AuthFailed(kind)
	}
	client := clientString(key)
	a.limit.logFailure(a.log, now, "client", client, "kind", kind,
		"method", loggedMethod(r), "route", Route(r.URL.EscapedPath()), "limited", over)
	if newly {
		a.logLimited(r, client, now)
	}
	return false
}

// logLimited logs that r's client address went over the limit, and where
// the address came from (clientSource). A peer's may be a proxy's that all
// its clients share, all of them refused: the line then says whether the
// request carried an X-Forwarded-For (read only from the proxies the
// operator trusts) and how to trust the proxy; a trusted proxy's own,
// that its header named no client.
func (a *Auth) logLimited(r *http.Request, client string, now time.Time) {
	from := clientSource(r)
	args := []any{"client", client, "from", from}
	switch from {
	case "peer":
		args = append(args, "x_forwarded_for_ignored", len(r.Header["X-Forwarded-For"]) > 0, "hint",
			"if this address is a reverse proxy, ingress or load balancer, every client behind it is refused too: "+
				"name it in trusted_proxies (--trusted-proxies) so that each client is limited on its own")
	case "trusted-proxy":
		args = append(args, "hint", "a trusted proxy's requests whose X-Forwarded-For is missing, malformed or names only trusted addresses "+
			"are counted against the proxy itself: check that it appends the client's address to X-Forwarded-For (Forwarded, RFC 7239, is not read)")
	}
	a.limit.logLimited(a.log, now, LimitedMessage, args...)
}

// hasSignature reports whether r presents an archive URL's signature as
// Auth.verify reads it: a sig parameter that is not empty in the query
// as url.ParseQuery decodes it, so that one whose name is spelt with
// escapes ("%73ig") is a credential too. A request without a query, as
// most are, parses none.
func hasSignature(r *http.Request) bool {
	return r.URL.RawQuery != "" && r.URL.Query().Get(signatureParam) != ""
}

// LimitedMessage is the message of the log line saying that a client
// address went over the limit of failed authentication attempts: its
// requests with credentials are answered 429 until it has waited.
const LimitedMessage = "client address over the limit of failed authentication attempts"

// clientString is key as logged: the address, or its /64.
func clientString(key netip.Prefix) string {
	switch {
	case !key.IsValid():
		return "local"
	case key.Addr().Is4():
		return key.Addr().String()
	}
	return key.String()
}

// limited is the layer in front of every door under client
// authentication (Server.ServeHTTP applies it): a request that presents credentials (an
// Authorization header, or an archive URL's signature) from a client
// address over the limit of failed attempts is refused, before any door
// checks them, with a *httperr.TooManyFailuresError (429 with
// Retry-After) that Server.ServeHTTP answers in the door's format; nil
// lets it through. A request without credentials passes: it cannot
// guess, and it is answered as it would be anyway.
func (a *Auth) limited(r *http.Request) error {
	if len(r.Header["Authorization"]) == 0 && !hasSignature(r) {
		return nil
	}
	wait, over := a.limit.wait(clientKey(r), a.now())
	if !over {
		return nil
	}
	if a.metrics != nil {
		a.metrics.AuthLimited()
	}
	return &httperr.TooManyFailuresError{Wait: wait}
}
