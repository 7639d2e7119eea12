package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestModuleFetches(t *testing.T) {
	m, reg := newTest(t)
	m.ModuleFetch("git", "success", 1000, time.Second)
	m.ModuleFetch("git", "too_large", 5000, time.Second)
	m.ModuleFetch("archive", "success", 10, time.Millisecond)
	for _, tc := range []struct {
		kind, outcome string
		want          float64
	}{{"git", "success", 1}, {"git", "too_large", 1}, {"archive", "success", 1}, {"archive", "changed", 0}} {
		if got := testutil.ToFloat64(m.modules.fetches.WithLabelValues(tc.kind, tc.outcome)); got != tc.want {
			t.Errorf("fetches{%s,%s} = %v, want %v", tc.kind, tc.outcome, got, tc.want)
		}
	}
	// Only stored packages count as bytes.
	if got := testutil.ToFloat64(m.modules.bytes.WithLabelValues("git")); got != 1000 {
		t.Errorf("git bytes = %v, want 1000", got)
	}
	if n, err := testutil.GatherAndCount(reg, "tfmirror_module_fetches_total"); err != nil || n != len(ModuleSourceKinds)*len(ModuleOutcomes) {
		t.Errorf("module fetch series = %d (%v), want every label pair pre-created", n, err)
	}
}
