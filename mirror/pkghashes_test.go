package mirror

import (
	"errors"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// OpenTofu's "packages" hashes, which no signature covers, are checked
// where the mirror can: every platform's zh: against its signed SHA256SUMS
// line, and the h1: of a platform whose archive is cached against that
// archive's. A mismatch refuses the package metadata as any verification
// failure does (counted, nothing stored); what cannot be checked (the h1:
// of an archive not cached) is passed on.
func TestPackageHashesAreChecked(t *testing.T) {
	t.Parallel()
	const version, asked = "1.0.0", "linux_amd64"
	wrongSHA := strings.Repeat("ab", 32)
	tests := []struct {
		name string
		// cache is a platform whose archive is cached first.
		cache  string
		setup  func(h *harness)
		reason verify.Reason // "": the metadata is served
	}{
		{name: "true hashes"},
		{name: "wrong zh of the asked platform", reason: verify.ReasonChecksum, setup: func(h *harness) {
			h.origin.SetPackageHashes(ns, typ, version, asked, []string{"zh:" + wrongSHA})
		}},
		{name: "wrong zh of another platform", reason: verify.ReasonChecksum, setup: func(h *harness) {
			h.origin.SetPackageHashes(ns, typ, version, "windows_amd64", []string{"zh:" + wrongSHA})
		}},
		{name: "zh of a platform SHA256SUMS has no line for", reason: verify.ReasonMissingChecksum, setup: func(h *harness) {
			h.origin.OmitFromSums(ns, typ, version, "windows_amd64", true)
		}},
		{name: "wrong h1 of a cached platform", cache: "darwin_arm64", reason: verify.ReasonChecksum, setup: func(h *harness) {
			h.origin.SetPackageHashes(ns, typ, version, "darwin_arm64",
				[]string{"zh:" + h.origin.SHA256(ns, typ, version, "darwin_arm64"), "h1:wrongwrongwrongwrongwrongwrongwrongwrongwro="})
		}},
		{name: "wrong h1 of a platform not cached", setup: func(h *harness) {
			h.origin.SetPackageHashes(ns, typ, version, "darwin_arm64",
				[]string{"zh:" + h.origin.SHA256(ns, typ, version, "darwin_arm64"), "h1:wrongwrongwrongwrongwrongwrongwrongwrongwro="})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			met := &refusalMetrics{}
			h := newHarness(t, harnessOptions{cfg: Config{Metrics: met}, origin: fakeorigin.Options{PackageHashes: true}})
			h.origin.AddProvider(ns, typ, []string{version}, platforms)
			if tc.cache != "" {
				if _, err := h.packages(version, tc.cache); err != nil {
					t.Fatal(err)
				}
				if r := h.read(t.Context(), version, tc.cache); r.err != nil {
					t.Fatal(r.err)
				}
				h.waitCommitted(h.origin.SHA256(ns, typ, version, tc.cache))
			}
			if tc.setup != nil {
				tc.setup(h)
			}
			_, err := h.packages(version, asked)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("package metadata: %v", err)
				}
				ev, err := h.engine.AirGap().Stored(h.provider(), mustVersion(t, version))
				if err != nil {
					t.Fatal(err)
				}
				if pe, ok := ev.Platform(asked); !ok || len(pe.Packages) != len(platforms) {
					t.Fatalf("stored packages %v, want one entry per platform", pe.Packages)
				}
				for _, reason := range verify.Reasons() {
					if n := met.count(string(reason)); n != 0 {
						t.Errorf("%d verification failures (%s)", n, reason)
					}
				}
				return
			}
			var verr *verify.Error
			if !errors.As(err, &verr) || verr.Reason != tc.reason || !errors.Is(err, verify.ErrIntegrity) {
				t.Fatalf("package metadata: %v, want a %s verification failure", err, tc.reason)
			}
			if n := met.count(string(tc.reason)); n != 1 {
				t.Errorf("%s verification failures = %d, want 1", tc.reason, n)
			}
			if ev, err := h.engine.AirGap().Stored(h.provider(), mustVersion(t, version)); err == nil {
				if _, ok := ev.Platform(asked); ok {
					t.Errorf("the refused package metadata of %s was stored", asked)
				}
			} else if !errors.Is(err, records.ErrNotCached) {
				t.Fatal(err)
			}
		})
	}
}
