package metrics_test

import (
	"context"
	"io"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/metrics"
)

// The cache lookups a module version's OCI zip makes (a miss when it is
// made, a hit when it is read again) are counted under the kinds
// docs/metrics.md gives tfmirror_cache_hits_total and
// tfmirror_cache_misses_total (metrics.CacheKinds: their series exist from
// start-up at 0), never under a kind a dashboard or a hit ratio by kind
// does not know of.
func TestModuleZipLookupsCountedUnderDocumentedKinds(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := harness.New(t, harness.Options{Config: harness.Config{Metrics: m, ScratchDir: t.TempDir()}})
	o := h.Origin
	o.AddTarball("m.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# one\n")}))
	o.AddModule("acme", "tarball", "aws", "0.1.0", o.TarballURL("m.tar.gz"))
	for range 2 { // made, then read from the cache
		z, err := h.Engine.Modules().Zips().OpenModuleZip(context.Background(), harness.TarballModule, enginetest.MustModuleVersion(t, "0.1.0"))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, z.Content())
		z.Close()
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "tfmirror_cache_hits_total" && mf.GetName() != "tfmirror_cache_misses_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "kind" && !slices.Contains(metrics.CacheKinds, l.GetValue()) {
					t.Errorf("%s{kind=%q} = %v: a kind docs/metrics.md does not list (%v)", mf.GetName(), l.GetValue(), s.GetCounter().GetValue(), metrics.CacheKinds)
				}
			}
		}
	}
}
