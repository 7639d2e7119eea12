package releasesdoor_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
)

// TestHeldVersionRetryAfter: a version the minimum release age holds is
// refused 451 with Retry-After at the time it becomes available, as the
// other front doors refuse one (docs/policy.md), on every file of it.
func TestHeldVersionRetryAfter(t *testing.T) {
	r := newRig(t, nil)
	signed := time.Now().Add(-time.Hour).Truncate(time.Second)
	r.origin.SetSignedAt(signed)
	r.side.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	for _, path := range []string{
		"/releases/hashicorp/terraform/1.6.0/terraform_1.6.0_linux_amd64.zip",
		"/releases/hashicorp/terraform/1.6.0/index.json",
		"/releases/opentofu/v1.8.0/tofu_1.8.0_SHA256SUMS",
	} {
		status, body, hdr := r.get(t, path)
		if status != http.StatusUnavailableForLegalReasons {
			t.Fatalf("%s: %d %s, want 451", path, status, body)
		}
		at, err := http.ParseTime(hdr.Get("Retry-After"))
		if want := signed.Add(72 * time.Hour); err != nil || !at.Equal(want) {
			t.Errorf("%s: Retry-After %q, want %s", path, hdr.Get("Retry-After"), want.UTC().Format(http.TimeFormat))
		}
	}
}
