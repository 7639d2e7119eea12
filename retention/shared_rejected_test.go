package retention

import (
	"bytes"
	"context"
	"testing"

	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/sharedstore"
)

// The bucket's pass reads every record listed, every hour, and nothing
// it reads is taken from the origin and written back: a record that does
// not authenticate (one of an earlier release, or of a key since dropped,
// whose version nobody asks for again) stays as it is. The pass leaves it
// out, as it always did, and does not count it as rejected
// (tfmirror_shared_rejected_total): counted at every pass, it made the
// rejection alert fire every hour for as long as the bucket kept it, long
// after the bucket was re-derived for what is used.
func TestRetentionSharedPassCountsNoRejection(t *testing.T) {
	a, sa, srv := replicaWithTwoVersionsShared(t)
	// A record the replicas' key did not sign: a key since dropped's.
	keys, err := sharedstore.NewKeys(bytes.Repeat([]byte("o"), sharedstore.MinKeyBytes), nil)
	if err != nil {
		t.Fatal(err)
	}
	old, err := sharedstore.Open(context.Background(), sharedstore.Config{URL: srv.URL(bucket, sharedPrefix), Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.PutMeta(t.Context(), packageKey(a.provider(), "0.9.0"), map[string]int{"schema": records.Schema}); err != nil {
		t.Fatal(err)
	}
	before := sa.Rejected()
	for pass := range 3 {
		done, err := a.ret.pruneShared(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if pass == 0 && len(done) != 1 {
			t.Errorf("removed %v, want 1.0.0's archive", removalNames(done))
		}
	}
	if n := sa.Rejected() - before; n != 0 {
		t.Errorf("three passes counted %d rejected objects, want none", n)
	}
}
