package served_test

import (
	"context"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/mirror/served"
	"github.com/tfmirror/tfmirror/v2/policy"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// TestHeld: the versions a list left out and the ones refused are listed
// with their rule, reason and date, each judged again when listed: one
// whose minimum release age has passed, or a policy lifted, is gone.
func TestHeld(t *testing.T) {
	o, side, clock, _ := releasesRig(t)
	rel := side.Served
	ctx := context.Background()
	now := clock.Now()
	side.Engine.SetPolicy(enginetest.DecodePolicy(t, `
minimum_release_age = "72h"
deny_version "get.opentofu.org/opentofu/tofu" {
  versions = ["1.8.0"]
  reason   = "use 1.8.1"
}
`))
	if h := rel.Held(); len(h) != 0 {
		t.Fatalf("held before anything was asked: %+v", h)
	}
	// 1.6.0 is released yesterday, 1.5.7 long ago; the list leaves the
	// former out.
	o.SetSignedAt(now.Add(-90 * 24 * time.Hour))
	o.SetVersionSignedAt("terraform", "1.6.0", now.Add(-24*time.Hour))
	list, _, err := rel.Versions(ctx, releases.HashiCorp, "terraform")
	if err != nil || len(list.Versions) != 1 || list.Versions[0].Version != "1.5.7" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if _, err := rel.Sums(ctx, releases.OpenTofu, "tofu", "1.8.0"); err == nil {
		t.Fatal("a denied version was served")
	}
	h := rel.Held()
	if len(h) != 2 {
		t.Fatalf("held: %+v, want 2", h)
	}
	tofu, tf := h[0], h[1]
	if tofu.Provider != "get.opentofu.org/opentofu/tofu" || tofu.Version != "1.8.0" || tofu.Rule != policy.RuleDenyVersion ||
		tofu.Reason != "use 1.8.1" || tofu.Kind != served.HeldCLIKind {
		t.Errorf("denied version: %+v", tofu)
	}
	if tf.Provider != "releases.hashicorp.com/hashicorp/terraform" || tf.Version != "1.6.0" || tf.Rule != policy.RuleMinReleaseAge ||
		!tf.AvailableAt.Equal(now.Add(48*time.Hour)) {
		t.Errorf("fresh version: %+v, want available at %s", tf, now.Add(48*time.Hour))
	}

	clock.Add(49 * time.Hour)
	if h := rel.Held(); len(h) != 1 || h[0].Version != "1.8.0" {
		t.Errorf("after its minimum release age: %+v, want the denied version alone", h)
	}
	side.Engine.SetPolicy(nil)
	if h := rel.Held(); h != nil {
		t.Errorf("without a policy: %+v", h)
	}
}
