// Package httperr is the one place where errors become HTTP status codes,
// for both of tfmirror's HTTP front doors: the mirror and registry
// protocols (package proxy) and the local admin API (package admin).
//
// It owns the mapping (Status) of the engine's errors (package mirror and
// its parts, with the failures of origins and module source hosts as the
// engine reports them: mirror/failure.OriginError), verification's
// (package verify) and the front doors' own (RequestError,
// ClientGoneError, ErrUnauthorized, ErrBadSignature,
// TooManyFailuresError), and the wait an
// error asks of the client (RetryAfter). It reads no error of the origin
// client (package discovery) or the module source fetcher
// (discovery/modsource): the layer in front of the engine's API
// (mirror/served) reports those in the engine's kinds. It does not write
// responses: each front door renders its own error body.
package httperr

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/tfmirror/tfmirror/v2/mirror/failure"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// StatusClientClosedRequest is the status recorded for a request whose
// client went away before it was answered (nginx's 499). Nobody receives
// it; it keeps such requests apart from the mirror's own failures in logs
// and metrics.
const StatusClientClosedRequest = 499

// ClientGoneError is Err met while the client had gone away.
type ClientGoneError struct{ Err error }

func (e *ClientGoneError) Error() string { return "client went away: " + e.Err.Error() }
func (e *ClientGoneError) Unwrap() error { return e.Err }

// ErrCutOff is the cause of a request's context when the mirror cut the
// request off: serve cancels its server's requests with it when the
// shutdown's deadline passes (or a second signal ends the wait), before
// it closes their connections. Such a request's client did not go away:
// it is answered 503, never 499, and its access-log line says it was
// aborted.
var ErrCutOff = errors.New("cut off by the mirror's shutdown")

// CutOff reports whether the mirror's cut-off (ErrCutOff) ended ctx, a
// request's context.
func CutOff(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), ErrCutOff)
}

// Gone is err, met by a request whose context is done: err as the
// mirror's cut-off (ErrCutOff) when that is what ended the context,
// else as a client that went away (ClientGoneError).
func Gone(ctx context.Context, err error) error {
	if CutOff(ctx) {
		return fmt.Errorf("%w: %w", ErrCutOff, err)
	}
	return &ClientGoneError{Err: err}
}

// RequestError is a malformed or refused request: a bad path part, body or
// method.
type RequestError struct {
	Status int // 400 unless set
	Msg    string
}

func (e *RequestError) Error() string { return e.Msg }

// BadRequest is a RequestError with status 400.
func BadRequest(format string, args ...any) error {
	return &RequestError{Status: http.StatusBadRequest, Msg: fmt.Sprintf(format, args...)}
}

// Authentication errors of the front doors, mapped to 401 and 403.
var (
	// ErrUnauthorized: a JSON document was requested without a valid bearer token.
	ErrUnauthorized = errors.New("unauthorized: a valid bearer token is required (configure credentials for this mirror's host in the CLI configuration)")
	// ErrBadSignature: a signed URL (a network mirror archive's, a
	// registry download answer's SHA256SUMS or signature, a module
	// package's) has no valid, unexpired signature. Each door wraps it
	// saying what to ask for again to get a fresh URL.
	ErrBadSignature = errors.New("forbidden: the URL's signature is missing, invalid or expired")
)

// TooManyFailuresError refuses a request whose client address failed
// authentication too often (429, with Retry-After: Wait).
type TooManyFailuresError struct{ Wait time.Duration }

func (e *TooManyFailuresError) Error() string {
	return fmt.Sprintf("too many failed authentication attempts from this address: try again in %ds", retryAfterSeconds(e.Wait))
}

// retryAfterSeconds is wait in whole seconds as Retry-After gives it:
// rounded up, at least 1 (a probe under way has no known end).
func retryAfterSeconds(wait time.Duration) int64 {
	return max(1, int64((wait+time.Second-1)/time.Second))
}

// Status is the HTTP status code of err. Trouble at an origin is never
// 404: clients read 404 as "no such provider".
func Status(err error) int {
	var reqErr *RequestError
	var originErr *failure.OriginError
	isOrigin := errors.As(err, &originErr)
	originKind := failure.Kind(-1) // no kind: err holds no origin failure
	if isOrigin {
		originKind = originErr.Kind
	}
	var goneErr *ClientGoneError
	var badArchive *failure.BadArchiveError
	var held *gate.PolicyError
	switch {
	case errors.Is(err, ErrCutOff):
		return http.StatusServiceUnavailable
	case errors.As(err, &goneErr):
		return StatusClientClosedRequest
	case errors.As(err, &reqErr):
		if reqErr.Status != 0 {
			return reqErr.Status
		}
		return http.StatusBadRequest
	case errors.Is(err, ErrUnauthorized):
		return http.StatusUnauthorized
	case errors.As(err, new(*TooManyFailuresError)):
		return http.StatusTooManyRequests
	case errors.Is(err, ErrBadSignature):
		return http.StatusForbidden
	case errors.As(err, &held):
		if held.Version == "" {
			// A provider or module the policy refuses whatever the
			// version is not in this mirror: clients say so.
			return http.StatusNotFound
		}
		// A held version: Terraform shows any status but 401, 403 and
		// 404 as "unsuccessful status" (403 would read as rejected
		// credentials, 404 from VERSION.json as a broken mirror); 451
		// says the refusal is the operator's.
		return http.StatusUnavailableForLegalReasons
	case errors.Is(err, failure.ErrDigestGone):
		// A document handed out and withdrawn for good (made with a
		// size its origin stated wrongly): not a 404, which OCI clients
		// report without the answer's message, the one that says to pull
		// the tag again.
		return http.StatusGone
	case originKind == failure.HostNotAllowed,
		originKind == failure.NotFound,
		originKind == failure.NoService,
		errors.Is(err, failure.ErrVersionNotFound),
		errors.Is(err, failure.ErrPlatformNotFound),
		errors.Is(err, failure.ErrDigestUnknown):
		return http.StatusNotFound
	case errors.Is(err, unsigned.ErrUnsignedOrigin):
		// An import refused (served versions that are withheld are
		// ErrVersionNotFound too, 404 above).
		return http.StatusForbidden
	case errors.Is(err, failure.ErrOffline), errors.Is(err, failure.ErrShutDown),
		originKind == failure.CircuitOpen:
		return http.StatusServiceUnavailable
	case errors.Is(err, failure.ErrNoEvidence):
		// A version imported without signature has no registry-protocol
		// answer (offline, a record of an earlier release is 503 above).
		return http.StatusNotFound
	case originKind == failure.UntrustedCertificate:
		// The operator's to fix (a CA to add): the body says how.
		return http.StatusBadGateway
	case errors.Is(err, verify.ErrIntegrity), errors.As(err, &badArchive),
		originKind == failure.ModuleSource:
		return http.StatusBadGateway
	case isOrigin:
		switch {
		case originErr.Timeout:
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

// RetryAfter is how long err asks the client to wait before trying
// again, and whether it asks at all: an origin's open circuit breaker
// (mirror/failure.OriginError.Wait) does, with its wait, 0 while a probe
// is under way and its end unknown; a client address over the limit of
// failed authentication attempts (TooManyFailuresError) does too.
func RetryAfter(err error) (time.Duration, bool) {
	var open *failure.OriginError
	if errors.As(err, &open) && open.Wait {
		return open.RetryAfter, true
	}
	var limited *TooManyFailuresError
	if errors.As(err, &limited) {
		return limited.Wait, true
	}
	return 0, false
}

// SetRetryAfter sets h's Retry-After for err when it has one: the
// seconds of RetryAfter (rounded up, at least 1: a probe under way has
// no known end), else the date of AvailableAt. Every front door answers
// its errors so.
func SetRetryAfter(h http.Header, err error) {
	if wait, ok := RetryAfter(err); ok {
		h.Set("Retry-After", strconv.FormatInt(retryAfterSeconds(wait), 10))
	} else if at, ok := AvailableAt(err); ok {
		h.Set("Retry-After", at.UTC().Format(http.TimeFormat))
	}
}

// AvailableAt is when the version err refuses becomes available, for a
// version held back by the package policy's minimum release age: the
// client may ask again then (a Retry-After date).
func AvailableAt(err error) (time.Time, bool) {
	var held *gate.PolicyError
	if errors.As(err, &held) && !held.Verdict.AvailableAt.IsZero() {
		return held.Verdict.AvailableAt, true
	}
	return time.Time{}, false
}
