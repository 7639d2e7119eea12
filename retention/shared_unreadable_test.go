package retention

import (
	"context"
	"encoding/json"
	"testing"
)

// unreadableInBucket is the bucket with one more version record, one
// that authenticates and that retention cannot read (a newer release's
// schema, written before a rollback, or damaged), naming sha.
type unreadableInBucket struct {
	Shared
	sha string
}

func (u unreadableInBucket) ListMeta(ctx context.Context, prefix string, fn func(key string, record json.RawMessage) error) (int, error) {
	n, err := u.Shared.ListMeta(ctx, prefix, fn)
	if err != nil || prefix != "package/" {
		return n, err
	}
	raw := json.RawMessage(`{"schema":99,"version":"9.0.0","packages":{"linux_amd64":{"digest":"sha256:` + u.sha + `"}}}`)
	return n, fn("package/tf.corp.test/platform/thing/9.0.0", raw)
}

// The bucket's pass keeps what a record it cannot read names, as the
// cache's pass does (TestUnreadableRecordKeepsItsArchives): it may be
// the only record of packages that cannot be fetched again. Before, it
// left such a record out, and deleted an archive it named with the
// version the rules removed.
func TestRetentionSharedKeepsWhatUnreadableRecordsName(t *testing.T) {
	a, sa, _ := replicaWithTwoVersionsShared(t)
	old := a.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")
	a.ret.shared = unreadableInBucket{Shared: a.ret.shared, sha: old}
	done, err := a.ret.pruneShared(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 0 {
		t.Errorf("removed from the bucket %v, want nothing", removalNames(done))
	}
	if !bucketArchives(t, sa)[old] {
		t.Error("the archive the unreadable record names was deleted from the bucket")
	}
}
