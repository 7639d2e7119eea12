package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tfmirror/tfmirror/mirror"
)

var _ mirror.RetentionMetrics = (*Metrics)(nil)

func TestRetention(t *testing.T) {
	m, reg := newTest(t)
	m.RetentionRemoved("keep-versions", 2, 300)
	m.RetentionRemoved("keep-versions", 1, 100)
	m.RetentionKept(5000, true)
	if got := testutil.ToFloat64(m.retention.versions.WithLabelValues("keep-versions")); got != 3 {
		t.Errorf("versions removed = %v, want 3", got)
	}
	if got := testutil.ToFloat64(m.retention.bytes.WithLabelValues("keep-versions")); got != 400 {
		t.Errorf("bytes removed = %v, want 400", got)
	}
	if got := testutil.ToFloat64(m.retention.unmet); got != 1 {
		t.Errorf("limit unmet = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.retention.kept); got != 5000 {
		t.Errorf("kept bytes = %v, want 5000", got)
	}
	if n, err := testutil.GatherAndCount(reg, "tfmirror_retention_removed_bytes_total"); err != nil || n != len(RetentionRules) {
		t.Errorf("series = %d (%v), want every rule pre-created", n, err)
	}
}
