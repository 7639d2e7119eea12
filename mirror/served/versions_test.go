package served_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/policy"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// Two builds of one CLI release (1.9.0+a signed 90 days ago, 1.9.0+b an
// hour ago) are dated each by its own signature under a minimum release
// age: the list leaves out the fresh one, which its archive refuses too,
// instead of taking it to be as old as the other.
func TestReleasesAgeBuildsOfOneRelease(t *testing.T) {
	o, side, clock, _ := releasesRig(t)
	now := clock.Now()
	for v, ago := range map[string]time.Duration{"1.9.0+a": 90 * 24 * time.Hour, "1.9.0+b": time.Hour} {
		o.Add("opentofu", "tofu", v, "linux_amd64")
		o.SetVersionSignedAt("tofu", v, now.Add(-ago))
	}
	o.SetSignedAt(now.Add(-400 * 24 * time.Hour))
	side.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	got := listedVersions(t, side.Served, releases.OpenTofu, "tofu")
	if !slices.Equal(got, []string{"1.9.0+a", "1.8.0"}) {
		t.Errorf("listed %v, want 1.9.0+a and 1.8.0", got)
	}
	err := readArchive(side.Served, releases.OpenTofu, "tofu", "1.9.0+b", "tofu_1.9.0+b_linux_amd64.zip")
	var pe *gate.PolicyError
	if !errors.As(err, &pe) || pe.Verdict.Rule != policy.RuleMinReleaseAge {
		t.Errorf("archive of 1.9.0+b: %v, want held by its minimum release age", err)
	}
}
