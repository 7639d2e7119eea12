package httperr

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/mirror/failure"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
	"github.com/tfmirror/tfmirror/v2/policy"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// TestStatusOfHostNotAllowed: the origin client's own refusal of a host
// outside the allowed origins answers like the proxy's early check, 404,
// not a server or gateway error.
func TestStatusOfHostNotAllowed(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("%w: %q", discovery.ErrHostNotAllowed, "evil.example"),
		fmt.Errorf("fetching versions: %w", fmt.Errorf("%w: %q", discovery.ErrHostNotAllowed, "evil.example")),
	} {
		if got := Status(failure.FromOrigin(err)); got != http.StatusNotFound {
			t.Errorf("Status(%v) = %d, want 404", err, got)
		}
	}
}

// TestStatusOfNoEvidence: a version without the origin's evidence (imported
// without signature) has no registry-protocol answer, 404; but offline, a
// record of an earlier release that could not be completed is the sealed
// mirror's 503, not a "does not exist".
func TestStatusOfNoEvidence(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{fmt.Errorf("%w: tf.corp.example/platform/thing 1.0.0 was imported without signature", records.ErrNoEvidence), http.StatusNotFound},
		{fmt.Errorf("%w: %w: registry.terraform.io/hashicorp/random 3.6.0 was cached by an earlier release", records.ErrOffline, records.ErrNoEvidence), http.StatusServiceUnavailable},
	}
	for _, tc := range tests {
		if got := Status(tc.err); got != tc.want {
			t.Errorf("Status(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

// TestStatusOfDigests: a digest never handed out, or of a version no
// longer kept, is a 404; one withdrawn for good (a manifest made with a
// size its origin stated wrongly) a 410, whose message OCI clients show.
func TestStatusOfDigests(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("%w: sha256:aa in registry.terraform.io/acme/alpha", records.ErrDigestUnknown), http.StatusNotFound},
		{fmt.Errorf("manifest sha256:aa was made with a wrong size: %w", failure.ErrDigestGone), http.StatusGone},
	} {
		if got := Status(tc.err); got != tc.want {
			t.Errorf("Status(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

// TestStatusOfUnsignedOrigin: a withheld version (imported without
// signature under an allowed origin) is a "does not exist", 404; the
// refusal of such an import, on its own, 403.
func TestStatusOfUnsignedOrigin(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("%w: %w: registry.terraform.io/acme/alpha 1.0.0 is withheld", records.ErrVersionNotFound, unsigned.ErrUnsignedOrigin), http.StatusNotFound},
		{fmt.Errorf("%w: registry.terraform.io is an allowed origin", unsigned.ErrUnsignedOrigin), http.StatusForbidden},
	} {
		if got := Status(tc.err); got != tc.want {
			t.Errorf("Status(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

// An origin whose package answer names another release than the one asked
// for fails verification like any package whose signature or checksum
// does not hold: a bad gateway, not a missing version.
func TestStatusOfNameMismatch(t *testing.T) {
	err := fmt.Errorf("registry.terraform.io/hashicorp/random 3.5.0 linux_amd64: %w",
		&verify.Error{Reason: verify.ReasonName, Detail: "terraform-provider-random_3.4.0_linux_amd64.zip is given as the package of linux_amd64"})
	if got := Status(err); got != http.StatusBadGateway {
		t.Errorf("Status(%v) = %d, want 502", err, got)
	}
}

// TestRetryAfter: an origin's open circuit breaker, however wrapped, asks
// the client to wait for as long as the breaker stays shut (0 while a
// probe is under way); no other error asks for a wait.
func TestRetryAfter(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		want   time.Duration
		wantOK bool
	}{
		{"circuit open", &discovery.CircuitOpenError{Failures: 5, RetryAfter: 30 * time.Second}, 30 * time.Second, true},
		{"circuit open, wrapped", &discovery.OriginError{Host: "registry.example", Op: "versions", Err: &discovery.CircuitOpenError{Failures: 5, RetryAfter: time.Minute}}, time.Minute, true},
		{"probe under way", fmt.Errorf("fetching versions: %w", &discovery.CircuitOpenError{Failures: 5}), 0, true},
		{"sentinel alone", discovery.ErrCircuitOpen, 0, false},
		{"origin error", &discovery.OriginError{Host: "registry.example", Op: "versions", StatusCode: http.StatusServiceUnavailable}, 0, false},
		{"offline", records.ErrOffline, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := RetryAfter(failure.FromOrigin(tc.err))
			if got != tc.want || ok != tc.wantOK {
				t.Fatalf("RetryAfter(%v) = %v, %v; want %v, %v", tc.err, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// TestStatusOfPolicyRefusals: a provider the policy refuses whole is not
// in this mirror (404); a held version is 451, which Terraform shows as
// an unsuccessful status rather than as rejected credentials (403) or a
// broken mirror (404 from VERSION.json); the age gate says when.
func TestStatusOfPolicyRefusals(t *testing.T) {
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		err    error
		status int
		at     time.Time
	}{
		{"address", &gate.PolicyError{Kind: "provider", Address: "registry.test/evil/x", Verdict: policy.Verdict{Rule: policy.RuleAllowList}}, http.StatusNotFound, time.Time{}},
		{"denied version", fmt.Errorf("serving: %w", &gate.PolicyError{Kind: "provider", Address: "registry.test/acme/a", Version: "1.0.1", Verdict: policy.Verdict{Rule: policy.RuleDenyVersion, Reason: "CVE"}}), http.StatusUnavailableForLegalReasons, time.Time{}},
		{"age gate", &gate.PolicyError{Kind: "module", Address: "registry.test/acme/vpc/aws", Version: "1.1.0", Verdict: policy.Verdict{Rule: policy.RuleMinReleaseAge, AvailableAt: at}}, http.StatusUnavailableForLegalReasons, at},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Status(tc.err); got != tc.status {
				t.Fatalf("status %d, want %d", got, tc.status)
			}
			got, ok := AvailableAt(tc.err)
			if ok != !tc.at.IsZero() || !got.Equal(tc.at) {
				t.Fatalf("available at %v (%v), want %v", got, ok, tc.at)
			}
		})
	}
}

// TestStatusOfUntrustedCertificate: an origin or source host whose TLS
// certificate is not trusted is a bad gateway, however it is wrapped (an
// origin request, a Git fetch of a module source), never a timeout or a
// server error.
func TestStatusOfUntrustedCertificate(t *testing.T) {
	ce := &discovery.CertificateError{Host: "registry.example.com", Cause: "signed by an unknown authority", Err: fmt.Errorf("x509: certificate signed by unknown authority")}
	for _, err := range []error{
		&discovery.OriginError{Host: "registry.example.com", Op: discovery.OpDiscovery, Err: ce},
		fmt.Errorf("git repository https://git.example.com/x.git: %w", &discovery.OriginError{Host: "registry.example.com", Op: discovery.OpModuleSource, Err: ce}),
	} {
		if got := Status(failure.FromOrigin(err)); got != http.StatusBadGateway {
			t.Errorf("Status(%v) = %d, want 502", err, got)
		}
	}
}

// TestStatusOfOriginFailures: the failures of origins and module source
// hosts, as the engine reports them (mirror/failure.FromOrigin, at the
// layer every front door reaches the engine through), answer the
// statuses they always did, with the origin's message, however wrapped;
// a timeout is 504, an origin's 429 and 503 are 503, any other trouble
// at an origin is 502, never 404 or 500.
func TestStatusOfOriginFailures(t *testing.T) {
	timeout := &discovery.OriginError{Host: "registry.example", Op: discovery.OpVersions, Err: fmt.Errorf("request: %w", context.DeadlineExceeded)}
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"not found", fmt.Errorf("%w: registry.example/acme/x", discovery.ErrNotFound), http.StatusNotFound},
		{"no provider service", fmt.Errorf("registry.example: %w", discovery.ErrNoProviderService), http.StatusNotFound},
		{"no module service", fmt.Errorf("registry.example: %w", discovery.ErrNoModuleService), http.StatusNotFound},
		{"circuit open", &discovery.OriginError{Host: "registry.example", Op: discovery.OpVersions, Err: &discovery.CircuitOpenError{Failures: 5, RetryAfter: time.Minute}}, http.StatusServiceUnavailable},
		{"origin 429", &discovery.OriginError{Host: "registry.example", Op: discovery.OpVersions, StatusCode: http.StatusTooManyRequests}, http.StatusServiceUnavailable},
		{"origin 503", fmt.Errorf("listing: %w", &discovery.OriginError{Host: "registry.example", Op: discovery.OpVersions, StatusCode: http.StatusServiceUnavailable}), http.StatusServiceUnavailable},
		{"origin 500", &discovery.OriginError{Host: "registry.example", Op: discovery.OpPackage, StatusCode: http.StatusInternalServerError}, http.StatusBadGateway},
		{"private address", &discovery.OriginError{Host: "registry.example", Op: discovery.OpDiscovery, Err: discovery.ErrPrivateAddress}, http.StatusBadGateway},
		{"timeout", timeout, http.StatusGatewayTimeout},
		{"unsupported module source", fmt.Errorf("acme/vpc/aws 1.0.0: %w", &modsource.UnsupportedError{Scheme: "hg", Detail: "not fetched"}), http.StatusBadGateway},
		{"module over a limit", fmt.Errorf("acme/vpc/aws 1.0.0: %w", &modsource.LimitError{Detail: "more than 10 files"}), http.StatusBadGateway},
		{"module source refused", fmt.Errorf("%w: HTTP 403", modsource.ErrSource), http.StatusBadGateway},
		{"module package unreadable", fmt.Errorf("%w: not a gzip archive", modsource.ErrBadPackage), http.StatusBadGateway},
		{"module package cut short by a timeout", fmt.Errorf("%w: %w", modsource.ErrBadPackage, timeout), http.StatusGatewayTimeout},
		{"version not found over an origin failure", fmt.Errorf("%w: %w", records.ErrVersionNotFound, &discovery.OriginError{Host: "registry.example", Op: discovery.OpPackage, StatusCode: 500}), http.StatusNotFound},
		{"no origin failure", errors.New("something else"), http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := failure.FromOrigin(tc.err)
			if got := Status(err); got != tc.want {
				t.Errorf("Status(%v) = %d, want %d", err, got, tc.want)
			}
			if err.Error() != tc.err.Error() {
				t.Errorf("the message changed: %q, was %q", err, tc.err)
			}
		})
	}
}

// The 429's message names the wait its Retry-After gives: a wait of less
// than half a second is not "try again in 0s" beside "Retry-After: 1".
func TestTooManyFailuresMessageAgreesWithRetryAfter(t *testing.T) {
	for _, wait := range []time.Duration{0, 300 * time.Millisecond, 1500 * time.Millisecond, 7 * time.Second} {
		err := &TooManyFailuresError{Wait: wait}
		h := http.Header{}
		SetRetryAfter(h, err)
		want := "try again in " + h.Get("Retry-After") + "s"
		if !strings.HasSuffix(err.Error(), want) {
			t.Errorf("wait %v: message %q, want it to end %q (Retry-After: %s)", wait, err.Error(), want, h.Get("Retry-After"))
		}
	}
}
