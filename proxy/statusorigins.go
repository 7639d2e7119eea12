package proxy

import (
	"fmt"
	"strings"
	"time"
)

// The status page's origin rows: per allowed origin, its circuit breaker,
// its last error with the cause in words, its last success, and what the
// last hour brought (client requests for its providers and modules, the
// downloads among them served from the cache, the requests sent to it).
// They are kept by Config.Origins (cmd/tfmirror/internal/originwatch);
// this page shows them.

// OriginHealth is one origin's row on the status page.
type OriginHealth struct {
	Host string `json:"host"`
	// State sums the row up: "ok" (its last request succeeded), "failing"
	// (its last request failed), "proxy" (the upstream proxy refused or
	// failed its last request, which never reached it), "unavailable"
	// (its circuit breaker is open: requests fail fast), "unverified"
	// (its last request succeeded, but a package it answered failed
	// verification within the hour) or "unused" (not contacted since
	// start).
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
	// LastVerificationFailure is the last package it answered that
	// failed verification (a bad signature, an archive that is not the
	// one its signed checksums name): its answers came, and were refused.
	LastVerificationFailure *OriginFailure `json:"last_verification_failure,omitempty"`
	// LastHour counts the last hour.
	LastHour OriginCounts `json:"last_hour"`
	// NotFoundRemembered is how many of its "not found" answers the
	// mirror holds now, to give again without asking it (not_found_ttl).
	NotFoundRemembered int `json:"not_found_remembered"`
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
	// VerificationFailures are the packages it answered that failed
	// verification.
	VerificationFailures int64 `json:"verification_failures"`
}

// originTrouble is the health block's line on the origins that fail, and
// on those whose requests the upstream proxy fails; "" when none does.
func originTrouble(rows []OriginHealth) string {
	var failing, proxied []string
	for _, r := range rows {
		switch r.State {
		case "failing", "unavailable", "unverified":
			failing = append(failing, r.Host)
		case "proxy":
			proxied = append(proxied, r.Host)
		}
	}
	var parts []string
	switch {
	case len(failing) == 1:
		parts = append(parts, fmt.Sprintf("%s is failing", failing[0]))
	case len(failing) > 1:
		parts = append(parts, fmt.Sprintf("%d of %d origins are failing", len(failing), len(rows)))
	}
	switch {
	case len(proxied) == 1:
		parts = append(parts, fmt.Sprintf("the upstream proxy fails the requests for %s", proxied[0]))
	case len(proxied) > 1:
		parts = append(parts, fmt.Sprintf("the upstream proxy fails the requests for %d of %d origins", len(proxied), len(rows)))
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ") + " (below)"
}

// originStateText and originStateClass show an OriginHealth.State.
func originStateText(state string) string {
	switch state {
	case "ok":
		return "answering"
	case "proxy":
		return "failing at the upstream proxy"
	case "unverified":
		return "answering, failing verification"
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
	case "failing", "unavailable", "proxy", "unverified":
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

// OriginOfPath is the origin host a request path of the network mirror or
// registry protocols names, lower case; "" for any other path (the status
// page's origin rows count requests by it).
func OriginOfPath(path string) string {
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
