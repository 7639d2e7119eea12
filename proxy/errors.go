package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/tfmirror/tfmirror/discovery"
	"github.com/tfmirror/tfmirror/discovery/modsource"
	"github.com/tfmirror/tfmirror/mirror"
	"github.com/tfmirror/tfmirror/verify"
)

// StatusClientClosedRequest is the status recorded for a request whose
// client went away before it was answered (nginx's 499). Nobody receives
// it; it keeps such requests apart from the mirror's own failures in logs
// and metrics.
const StatusClientClosedRequest = 499

// clientGoneError is err met while the client had gone away.
type clientGoneError struct{ err error }

func (e *clientGoneError) Error() string { return "client went away: " + e.err.Error() }
func (e *clientGoneError) Unwrap() error { return e.err }

// RequestError is a malformed request: a bad path part or method.
type RequestError struct {
	Status int // 400 unless set
	Msg    string
}

func (e *RequestError) Error() string { return e.Msg }

func badRequest(format string, args ...any) error {
	return &RequestError{Status: http.StatusBadRequest, Msg: fmt.Sprintf(format, args...)}
}

// statusOf is the one place where errors become HTTP status codes: the
// engine's (package mirror), the origin client's (package discovery),
// verification's (package verify) and the front door's own. Trouble at an
// origin is never 404: clients read 404 as "no such provider".
func statusOf(err error) int {
	var reqErr *RequestError
	var originErr *discovery.OriginError
	var goneErr *clientGoneError
	var badArchive *mirror.BadArchiveError
	switch {
	case errors.As(err, &goneErr):
		return StatusClientClosedRequest
	case errors.As(err, &reqErr):
		if reqErr.Status != 0 {
			return reqErr.Status
		}
		return http.StatusBadRequest
	case errors.Is(err, ErrUnauthorized):
		return http.StatusUnauthorized
	case errors.Is(err, ErrBadSignature):
		return http.StatusForbidden
	case errors.Is(err, mirror.ErrOriginNotAllowed),
		errors.Is(err, discovery.ErrHostNotAllowed),
		errors.Is(err, discovery.ErrNotFound),
		errors.Is(err, discovery.ErrNoProviderService),
		errors.Is(err, discovery.ErrNoModuleService),
		errors.Is(err, mirror.ErrVersionNotFound),
		errors.Is(err, mirror.ErrPlatformNotFound):
		return http.StatusNotFound
	case errors.Is(err, mirror.ErrOffline), errors.Is(err, mirror.ErrShutDown),
		errors.Is(err, discovery.ErrCircuitOpen):
		return http.StatusServiceUnavailable
	case errors.Is(err, mirror.ErrNoEvidence):
		// A version imported without signature has no registry-protocol
		// answer (offline, a record of an earlier release is 503 above).
		return http.StatusNotFound
	case errors.Is(err, verify.ErrIntegrity), errors.As(err, &badArchive),
		errors.Is(err, modsource.ErrUnsupported), errors.As(err, new(*modsource.LimitError)):
		return http.StatusBadGateway
	case errors.As(err, &originErr):
		switch {
		case originErr.Timeout():
			return http.StatusGatewayTimeout
		case originErr.StatusCode == http.StatusTooManyRequests,
			originErr.StatusCode == http.StatusServiceUnavailable:
			return http.StatusServiceUnavailable
		default:
			return http.StatusBadGateway
		}
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	default:
		return http.StatusInternalServerError
	}
}

// errorBody is the JSON error envelope, the same shape registries use.
type errorBody struct {
	Errors []string `json:"errors"`
}

// writeError answers with err's status and a JSON body. Internal errors are
// not described to the client beyond their status.
func writeError(w http.ResponseWriter, err error) int {
	status := statusOf(err)
	msg := err.Error()
	if status == http.StatusInternalServerError {
		msg = "internal error"
	}
	w.Header().Set("Cache-Control", errorCacheControl)
	w.Header().Del("ETag")
	var open *discovery.CircuitOpenError
	if errors.As(err, &open) {
		w.Header().Set("Retry-After", retryAfterSeconds(open.RetryAfter))
	}
	writeJSON(w, status, errorBody{Errors: []string{msg}})
	return status
}

// retryAfterSeconds is d as a Retry-After value: whole seconds, rounded
// up, at least 1 (a probe under way has no known end).
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(max(1, int64((d+time.Second-1)/time.Second)), 10)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	writeJSONBody(w, status, renderJSON(v))
}

// renderJSON encodes v with a trailing newline, or returns nil.
func renderJSON(v any) []byte {
	body, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return append(body, '\n')
}

// writeJSONBody sends body, as rendered by renderJSON (nil: an internal error).
func writeJSONBody(w http.ResponseWriter, status int, body []byte) {
	if body == nil {
		status = http.StatusInternalServerError
		body = []byte(`{"errors":["internal error"]}` + "\n")
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	if h.Get("Cache-Control") == "" {
		h.Set("Cache-Control", "no-store")
	}
	w.WriteHeader(status)
	w.Write(body)
}
