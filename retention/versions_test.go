package retention

import (
	"errors"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// A prune names exactly the versions it removes: "1.1.0" is not
// 1.1.0+a or 1.1.0+b (each a version of its own, which may not be
// fetched again), "v1.1.0" is 1.1.0, and a version with a number too large
// for 64 bits names nothing (it is answered, not panicked on).
func TestPruneNamesOneVersion(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{ret: Config{Metrics: &retentionMetrics{}, Interval: -1}})
	all := []string{"1.1.0", "1.1.0+a", "1.1.0+b"}
	h.origin.AddProvider(ns, typ, all, []string{"linux_amd64"})
	h.readAll(all...)
	p := addrs.Provider{Hostname: originHost, Namespace: ns, Type: typ}
	for _, bad := range []string{"99999999999999999999.0.0", "1.1.0+c"} {
		if _, err := h.ret.Prune(t.Context(), PruneRequest{Provider: &p, Versions: []string{bad}}); !errors.Is(err, records.ErrVersionNotFound) {
			t.Errorf("prune of %s: %v, want ErrVersionNotFound", bad, err)
		}
	}
	done, err := h.ret.Prune(t.Context(), PruneRequest{Provider: &p, Versions: []string{"v1.1.0"}})
	if names := removalNames(done); err != nil || len(done) != 1 || done[0].Version != "1.1.0" {
		t.Errorf("prune of v1.1.0 removed %v, %v; want 1.1.0 alone", names, err)
	}
	for _, v := range []string{"1.1.0+a", "1.1.0+b"} {
		if !h.isCached(v) {
			t.Errorf("%s was removed by a prune of 1.1.0", v)
		}
	}
}
