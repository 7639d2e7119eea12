package retention

import (
	"testing"
)

// The bucket's pass removes nothing while the pins were never read, as
// the pass over the cache does not (TestRetentionRulesWaitForPins): what
// they pin is not known, and a pinned version is kept from every rule,
// in the shared store's bucket too.
func TestRetentionSharedPassWaitsForPins(t *testing.T) {
	a, sa, _ := replicaWithTwoVersionsSharedPins(t, brokenPins{})
	a.ret.pins.first(a.ret.log)
	done, err := a.ret.pruneShared(t.Context())
	if len(done) != 0 {
		t.Errorf("the bucket's pass with unreadable pins removed %v (%v)", removalNames(done), err)
	}
	if err == nil {
		t.Error("the bucket's pass with unreadable pins says nothing of them")
	}
	if n := len(bucketArchives(t, sa)); n != 2 {
		t.Errorf("the bucket holds %d archives, want both", n)
	}
}
