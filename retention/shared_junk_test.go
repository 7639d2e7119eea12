package retention

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// junkShared is the bucket with n more records under each prefix the
// bucket's pass lists, and n more archives, that no replica wrote: a
// writer of the bucket's. The store reads each record as it lists it
// and hands the pass only those that authenticate
// (sharedstore.TestListMetaReadsAsItLists): the junk records are those
// it leaves out.
type junkShared struct {
	Shared
	n int
}

func (j *junkShared) ListMeta(ctx context.Context, prefix string, fn func(key string, record json.RawMessage) error) (int, error) {
	n, err := j.Shared.ListMeta(ctx, prefix, fn)
	return n + j.n, err
}

func (j *junkShared) ListArchives(ctx context.Context, fn func(sha string, size int64, stored time.Time) error) error {
	if err := j.Shared.ListArchives(ctx, fn); err != nil {
		return err
	}
	for i := range j.n {
		if err := fn(fmt.Sprintf("%064x", i+1), 1<<20, time.Now()); err != nil {
			return err
		}
	}
	return nil
}

// The bucket's pass holds what it reads of the bucket by what the
// replicas wrote, not by what the bucket lists: a writer of the bucket
// who adds millions of objects under the listed prefixes (their keys up
// to S3's 1024 bytes each) costs the pass time, bounded by its timeout,
// not memory; the pass removes what the rules say, as without the junk.
func TestRetentionSharedPassBounded(t *testing.T) {
	a, _, _ := replicaWithTwoVersionsShared(t)
	junk := &junkShared{Shared: a.ret.shared, n: 20000}
	a.ret.shared = junk
	done, err := a.ret.pruneShared(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := removalNames(done), []string{"1.0.0 keep-versions"}; !reflect.DeepEqual(got, want) {
		t.Errorf("removed from the bucket %v, want %v", got, want)
	}
}
