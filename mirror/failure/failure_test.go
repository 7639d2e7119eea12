package failure_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/mirror/failure"
)

// TestFromOrigin: each failure of the origin client and the module
// source fetcher, however wrapped, becomes its kind in the engine's
// errors, with the origin's status, timeout and circuit wait, its message
// and its chain unchanged; converting twice is converting once.
func TestFromOrigin(t *testing.T) {
	origin := func(status int, err error) *discovery.OriginError {
		return &discovery.OriginError{Host: "registry.test", Op: discovery.OpVersions, StatusCode: status, Err: err}
	}
	for _, tc := range []struct {
		name    string
		err     error
		kind    failure.Kind
		status  int
		timeout bool
		wait    time.Duration
		waits   bool
		reaches error
	}{
		{"not found", fmt.Errorf("%w: registry.test/acme/x", discovery.ErrNotFound), failure.NotFound, 0, false, 0, false, discovery.ErrNotFound},
		{"host not allowed", fmt.Errorf("%w: %q", discovery.ErrHostNotAllowed, "evil.test"), failure.HostNotAllowed, 0, false, 0, false, discovery.ErrHostNotAllowed},
		{"no provider service", fmt.Errorf("x: %w", discovery.ErrNoProviderService), failure.NoService, 0, false, 0, false, discovery.ErrNoProviderService},
		{"no module service", fmt.Errorf("x: %w", discovery.ErrNoModuleService), failure.NoService, 0, false, 0, false, discovery.ErrNoModuleService},
		{"circuit open", origin(0, &discovery.CircuitOpenError{Failures: 5, RetryAfter: time.Minute}), failure.CircuitOpen, 0, false, time.Minute, true, discovery.ErrCircuitOpen},
		{"probe under way", fmt.Errorf("x: %w", &discovery.CircuitOpenError{Failures: 5}), failure.CircuitOpen, 0, false, 0, true, discovery.ErrCircuitOpen},
		{"circuit sentinel alone", discovery.ErrCircuitOpen, failure.CircuitOpen, 0, false, 0, false, discovery.ErrCircuitOpen},
		{"untrusted certificate", origin(0, &discovery.CertificateError{Host: "registry.test", Cause: "unknown authority", Err: errors.New("x509")}), failure.UntrustedCertificate, 0, false, 0, false, discovery.ErrUntrustedCertificate},
		{"module source unsupported", &modsource.UnsupportedError{Scheme: "hg"}, failure.ModuleSource, 0, false, 0, false, modsource.ErrUnsupported},
		{"module over a limit", fmt.Errorf("x: %w", &modsource.LimitError{Detail: "too many files"}), failure.ModuleSource, 0, false, 0, false, nil},
		{"module source refused", fmt.Errorf("%w: 403", modsource.ErrSource), failure.ModuleSource, 0, false, 0, false, modsource.ErrSource},
		{"module package unreadable", fmt.Errorf("%w: not a gzip archive", modsource.ErrBadPackage), failure.ModuleSource, 0, false, 0, false, modsource.ErrBadPackage},
		// The connection that brought the package failed first: the
		// origin's failure, as it is (a timeout stays one).
		{"module package cut short by a timeout", fmt.Errorf("%w: %w", modsource.ErrBadPackage, origin(0, context.DeadlineExceeded)), failure.OriginFailed, 0, true, 0, false, modsource.ErrBadPackage},
		{"origin status", fmt.Errorf("listing: %w", origin(http.StatusBadGateway, nil)), failure.OriginFailed, http.StatusBadGateway, false, 0, false, nil},
		{"origin timeout", origin(0, context.DeadlineExceeded), failure.OriginFailed, 0, true, 0, false, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := failure.FromOrigin(tc.err)
			var fe *failure.OriginError
			if !errors.As(err, &fe) {
				t.Fatalf("FromOrigin(%v) = %T, want a *failure.OriginError", tc.err, err)
			}
			if fe.Kind != tc.kind || fe.StatusCode != tc.status || fe.Timeout != tc.timeout || fe.Wait != tc.waits || fe.RetryAfter != tc.wait {
				t.Errorf("%+v, want kind %v, status %d, timeout %v, wait %v %v", fe, tc.kind, tc.status, tc.timeout, tc.waits, tc.wait)
			}
			if err.Error() != tc.err.Error() {
				t.Errorf("message %q, was %q", err, tc.err)
			}
			if tc.reaches != nil && !errors.Is(err, tc.reaches) {
				t.Errorf("the chain no longer reaches %v", tc.reaches)
			}
			if again := failure.FromOrigin(err); again != err {
				t.Errorf("converted twice: %#v", again)
			}
		})
	}
	for _, err := range []error{nil, failure.ErrOffline, errors.New("something else"), fmt.Errorf("x: %w", context.Canceled)} {
		if got := failure.FromOrigin(err); got != err {
			t.Errorf("FromOrigin(%v) = %v, want it as it is", err, got)
		}
	}
}
