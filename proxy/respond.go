package proxy

import (
	"log/slog"
	"net/http"

	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
)

// responder is what every family of routes shares: how an error is
// answered and logged, the caching policy of fresh documents, and client
// authentication (auth.go).
type responder struct {
	log  *slog.Logger
	auth *Auth // nil: no client authentication

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
	level := slog.LevelInfo
	switch {
	case status == httperr.StatusClientClosedRequest:
		level = slog.LevelDebug
	case status == http.StatusInternalServerError:
		level = slog.LevelError
	case status >= 500:
		level = slog.LevelWarn
	}
	rs.log.Log(r.Context(), level, "request failed", "path", r.URL.EscapedPath(), "status", status, "error", err)
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
