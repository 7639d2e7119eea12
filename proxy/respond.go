package proxy

import (
	"log/slog"
	"net/http"
	"time"

	"golang.org/x/time/rate"

	"github.com/tfmirror/tfmirror/v2/internal/logbound"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
)

// responder is what every family of routes shares: how an error is
// answered and logged, the caching policy of fresh documents, and client
// authentication (auth.go).
type responder struct {
	log      *slog.Logger
	auth     *Auth // nil: no client authentication
	failures *Failures

	documentCacheControl []string // Cache-Control of fresh index.json and VERSION.json, from the engine's VersionsTTL
}

// fail answers with err and logs it once, at a level that says whose
// fault it is: the mirror's (error), an origin's (warn) or the client's
// (info). A client that went away is told nothing and logged at debug.
func (rs *responder) fail(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		err = httperr.Gone(r.Context(), err)
	}
	status := writeError(w, err)
	rs.failures.Log(rs.log, w, r, status, "path", LoggedPath(r), "status", status, "error", err)
}

// Failures logs a front door's "request failed" lines, one per failed
// request, at a level that says whose fault it is: the mirror's (error),
// an origin's (warn: one down, its circuit breaker open), a client gone
// (debug) or the client's own (info: a made-up name, an unknown host, a
// malformed path). A client can make as many of the last two as it asks
// for: of each, at most faultBurst are logged at their level at once,
// then one every faultEvery, the others at debug with their number on the
// next (internal/logbound); the access log names every request's status
// all the same. Safe for concurrent use.
type Failures struct{ clientFaults, originFaults *logbound.Warnings }

// NewFailures returns the bound of a front door's "request failed" lines.
func NewFailures() *Failures {
	return &Failures{
		clientFaults: logbound.New(rate.Every(faultEvery), faultBurst, "failures_logged_at_debug"),
		originFaults: logbound.New(rate.Every(faultEvery), faultBurst, "failures_logged_at_debug"),
	}
}

const (
	faultBurst = 20
	faultEvery = 10 * time.Second
)

// Log logs the failure of r, answered status on w, with its attributes
// args, led by the request id w carries (Instrument's X-Request-Id), so
// that the line is found by the id a client was sent, as its access-log
// line is.
func (f *Failures) Log(log *slog.Logger, w http.ResponseWriter, r *http.Request, status int, args ...any) {
	const msg = "request failed"
	if id := w.Header()["X-Request-Id"]; len(id) > 0 {
		args = append([]any{"request_id", id[0]}, args...)
	}
	switch {
	case status == httperr.StatusClientClosedRequest:
		log.Log(r.Context(), slog.LevelDebug, msg, args...)
	case status == http.StatusInternalServerError:
		log.Log(r.Context(), slog.LevelError, msg, args...)
	case status >= 500:
		f.originFaults.Log(log, time.Now(), msg, args...)
	default:
		f.clientFaults.LogAt(log, time.Now(), slog.LevelInfo, msg, args...)
	}
}

// MarkStale marks an answer made from a version list the origin could not
// refresh (stale), for every front door that answers one: the
// X-Tfmirror-Stale header and a Warning (110). The door sets its
// Cache-Control for it: no-cache, so that a cache in front revalidates
// it.
func MarkStale(w http.ResponseWriter, stale bool) {
	if stale {
		w.Header().Set("X-Tfmirror-Stale", "1")
		w.Header().Add("Warning", `110 tfmirror "Response is stale: the origin could not be reached"`)
	}
}
