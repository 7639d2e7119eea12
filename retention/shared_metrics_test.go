package retention

import (
	"testing"
)

// What the bucket's pass removes is counted, apart from what the passes
// over the cache remove: the bucket's archives are other bytes.
func TestRetentionSharedPassCounted(t *testing.T) {
	met := &retentionMetrics{}
	a, sa, _ := replicaWithTwoVersionsSharedConfig(t, Config{KeepVersions: 1, Interval: -1, Metrics: met})
	sizes := bucketArchives(t, sa)
	done, err := a.ret.pruneShared(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 1 || len(done[0].Archives) != 1 || done[0].Bytes <= 0 {
		t.Fatalf("removed from the bucket %+v, want the packages of 1.0.0", done)
	}
	if _, ok := sizes[done[0].Archives[0]]; !ok {
		t.Fatalf("removed %s, which the bucket did not hold", done[0].Archives[0])
	}
	met.mu.Lock()
	defer met.mu.Unlock()
	if got, want := met.shared[RuleKeepVersions], [2]int64{1, done[0].Bytes}; got != want {
		t.Errorf("metrics of the bucket: %v versions, bytes removed by keep-versions; want %v", got, want)
	}
	if len(met.removed) != 0 {
		t.Errorf("the bucket's removals counted as the cache's: %v", met.removed)
	}
}
