package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tfmirror/tfmirror/v2/mirror/cachecheck"
	"github.com/tfmirror/tfmirror/v2/retention"
)

var _ retention.Metrics = (*Metrics)(nil)

func TestRetention(t *testing.T) {
	m, reg := newTest(t)
	m.RetentionRemoved("keep-versions", 2, 300)
	m.RetentionRemoved("keep-versions", 1, 100)
	m.RetentionSharedRemoved("keep-versions", 1, 50)
	m.RetentionKept(5000, true)
	if got := testutil.ToFloat64(m.retention.versions.WithLabelValues("keep-versions", "cache")); got != 3 {
		t.Errorf("versions removed = %v, want 3", got)
	}
	if got := testutil.ToFloat64(m.retention.bytes.WithLabelValues("keep-versions", "cache")); got != 400 {
		t.Errorf("bytes removed = %v, want 400", got)
	}
	if got := testutil.ToFloat64(m.retention.bytes.WithLabelValues("keep-versions", "shared")); got != 50 {
		t.Errorf("bytes removed from the bucket = %v, want 50", got)
	}
	if got := testutil.ToFloat64(m.retention.unmet); got != 1 {
		t.Errorf("limit unmet = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.retention.kept); got != 5000 {
		t.Errorf("kept bytes = %v, want 5000", got)
	}
	if n, err := testutil.GatherAndCount(reg, "tfmirror_retention_removed_bytes_total"); err != nil || n != len(RetentionRules)+len(RetentionSharedRules) {
		t.Errorf("series = %d (%v), want every rule pre-created", n, err)
	}
}

var _ cachecheck.Metrics = (*Metrics)(nil)

func TestCacheChecked(t *testing.T) {
	m, _ := newTest(t)
	if got := testutil.ToFloat64(m.cacheCheck.last); got != 0 {
		t.Errorf("before any check: timestamp %v, want 0", got)
	}
	m.CacheChecked(time.Unix(1_800_000_000, 500_000_000), 40, 2)
	if got := testutil.ToFloat64(m.cacheCheck.last); got != 1_800_000_000.5 {
		t.Errorf("timestamp = %v, want 1800000000.5", got)
	}
	if got := testutil.ToFloat64(m.cacheCheck.damaged); got != 2 {
		t.Errorf("damaged = %v, want 2", got)
	}
}

// TestPolicyRefused: refusals are counted under their rule.
func TestPolicyRefused(t *testing.T) {
	m, err := New(prometheus.NewRegistry(), Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	m.PolicyRefused("deny_version")
	m.PolicyRefused("deny_version")
	m.PolicyRefused("min_release_age")
	if got := testutil.ToFloat64(m.policy.refused.WithLabelValues("deny_version")); got != 2 {
		t.Fatalf("deny_version refusals %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.policy.refused.WithLabelValues("allow_list")); got != 0 {
		t.Fatalf("allow_list refusals %v, want 0", got)
	}
}

// TestCLIMetrics: the CLI releases side is counted per product.
func TestCLIMetrics(t *testing.T) {
	m, err := New(prometheus.NewRegistry(), Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	m.CLIServed("hashicorp", "terraform", "archive", false)
	m.CLIServed("hashicorp", "terraform", "list", true)
	m.CLIRefused("opentofu", "tofu", "signature")
	if got := testutil.ToFloat64(m.releases.served.WithLabelValues("hashicorp", "terraform", "archive", "false")); got != 1 {
		t.Fatalf("archives served %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.releases.served.WithLabelValues("hashicorp", "terraform", "list", "true")); got != 1 {
		t.Fatalf("stale lists %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.releases.refused.WithLabelValues("opentofu", "tofu", "signature")); got != 1 {
		t.Fatalf("refusals %v, want 1", got)
	}
}
