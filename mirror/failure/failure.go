// Package failure holds the engine's errors, as the front doors read
// them: its own (ErrVersionNotFound, ErrOffline, BadArchiveError, ...;
// mirror/records names the same values for the engine's parts), and the
// failures of an origin or a module source host reported in the engine's
// own kinds (OriginError, made by FromOrigin), so that a front door maps
// the engine's errors only and never reads the origin client's (package
// discovery) or the module source fetcher's (package discovery/modsource).
//
// The layer in front of the engine's API (mirror/served) passes every
// error it returns through FromOrigin. An OriginError keeps the error it
// was made from (its message is the one users see, and errors.Is and
// errors.As still reach it), and says what the front doors need: its
// kind, the origin's status, whether it timed out, and the wait an open
// circuit breaker asks for.
package failure

import (
	"errors"
	"fmt"
	"time"

	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
)

// Kind is what went wrong at an origin or a module source host.
type Kind int

const (
	// OriginFailed: no usable answer (a connection or TLS failure, a
	// timeout, an unexpected status, a malformed or too large answer);
	// OriginError.StatusCode and OriginError.Timeout say more.
	OriginFailed Kind = iota
	// NotFound: the origin answered that it has no such provider,
	// module, version or file.
	NotFound
	// HostNotAllowed: the host is not among the allowed origins;
	// nothing was sent.
	HostNotAllowed
	// NoService: the host is no provider registry, or no module
	// registry (its service discovery names no such service).
	NoService
	// CircuitOpen: the origin keeps failing and is left alone for a
	// while (OriginError.RetryAfter); nothing was sent.
	CircuitOpen
	// UntrustedCertificate: the host's TLS certificate is not trusted:
	// the operator's to fix (a CA to add).
	UntrustedCertificate
	// ModuleSource: a module's source is not one the mirror fetches, its
	// host refused the package or sent none the mirror can read
	// (modsource.ErrBadPackage), or the package is over a limit or one
	// its zip cannot hold (modsource.ErrLinkLoop).
	ModuleSource
)

func (k Kind) String() string {
	switch k {
	case OriginFailed:
		return "origin failed"
	case NotFound:
		return "not found at the origin"
	case HostNotAllowed:
		return "origin host not allowed"
	case NoService:
		return "no registry service"
	case CircuitOpen:
		return "circuit open"
	case UntrustedCertificate:
		return "untrusted certificate"
	case ModuleSource:
		return "module source refused"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// OriginError is a failure of an origin or a module source host, in the
// engine's kinds. Its message is that of the error it was made from.
type OriginError struct {
	Kind Kind
	// StatusCode is the origin's unexpected HTTP status, 0 when the
	// failure was not one.
	StatusCode int
	// Timeout says the origin did not answer in time.
	Timeout bool
	// Wait says an open circuit breaker asks the client to wait
	// RetryAfter (0 while a probe is under way and its end unknown).
	Wait       bool
	RetryAfter time.Duration
	// Err is the error it was made from.
	Err error
}

func (e *OriginError) Error() string { return e.Err.Error() }
func (e *OriginError) Unwrap() error { return e.Err }

// FromOrigin returns err with the failure of an origin or a module
// source host it holds, if any, reported as an *OriginError that wraps
// it; any other err (nil included) is returned as it is. Where err holds
// more than one, the kind is the first of: NotFound, HostNotAllowed and
// NoService (the origin has no such thing), CircuitOpen,
// UntrustedCertificate, ModuleSource, OriginFailed; a package its source
// host sent that cannot be read (modsource.ErrBadPackage) is ModuleSource
// only when no failure of the origin's is held with it (a connection cut
// short is OriginFailed, and keeps its Timeout).
func FromOrigin(err error) error {
	if err == nil {
		return nil
	}
	var done *OriginError
	if errors.As(err, &done) {
		return err
	}
	e := &OriginError{Err: err}
	var (
		oe   *discovery.OriginError
		open *discovery.CircuitOpenError
	)
	if errors.As(err, &open) {
		e.Wait, e.RetryAfter = true, open.RetryAfter
	}
	isOrigin := errors.As(err, &oe)
	if isOrigin {
		e.StatusCode, e.Timeout = oe.StatusCode, oe.Timeout()
	}
	switch {
	case errors.Is(err, discovery.ErrNotFound):
		e.Kind = NotFound
	case errors.Is(err, discovery.ErrHostNotAllowed):
		e.Kind = HostNotAllowed
	case errors.Is(err, discovery.ErrNoProviderService), errors.Is(err, discovery.ErrNoModuleService):
		e.Kind = NoService
	case errors.Is(err, discovery.ErrCircuitOpen):
		e.Kind = CircuitOpen
	case errors.Is(err, discovery.ErrUntrustedCertificate):
		e.Kind = UntrustedCertificate
	case errors.Is(err, modsource.ErrUnsupported), errors.As(err, new(*modsource.LimitError)),
		errors.Is(err, modsource.ErrSource), errors.Is(err, modsource.ErrLinkLoop):
		e.Kind = ModuleSource
	case isOrigin:
		e.Kind = OriginFailed
	case errors.Is(err, modsource.ErrBadPackage):
		e.Kind = ModuleSource
	default:
		return err
	}
	return e
}
