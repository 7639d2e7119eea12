package retention

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/sharedstore"
)

// putLastUseOfFormatOne writes to the bucket the last use of key at at
// as a replica of release 2.0.0 writes it, under the replicas' key: a
// record of MAC format 1, which this release rejects.
func putLastUseOfFormatOne(t *testing.T, srv *s3test.Server, key string, at time.Time) {
	t.Helper()
	k := bytes.Repeat([]byte("r"), sharedstore.MinKeyBytes) // newSharedStore's
	keys, err := sharedstore.NewKeys(k, nil)
	if err != nil {
		t.Fatal(err)
	}
	name := sharedPrefix + "/meta/" + lastUsePrefix + key
	stored := at.UTC().Format(time.RFC3339)
	rec := fmt.Sprintf(`{"at":%q}`, at.UTC().Format(time.RFC3339Nano))
	m := hmac.New(sha256.New, k)
	var n [8]byte
	for _, f := range []string{"tfmirror shared-store object v1", "last_use", name, stored, rec} {
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		m.Write(n[:])
		m.Write([]byte(f))
	}
	doc := fmt.Sprintf(`{"stored_at":%q,"record":%s,"key_id":%q,"mac":%q}`, stored, rec, keys.ID(),
		base64.StdEncoding.EncodeToString(m.Sum(nil)))
	if _, err := srv.Client().PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket),
		Key: aws.String(name), Body: bytes.NewReader([]byte(doc))}); err != nil {
		t.Fatal(err)
	}
}

// cachedEarlier is the cache with its archives stored by earlier than
// the real time: the cache dates them by the real clock, the engine's
// (mirror.Config.Now) left aside.
type cachedEarlier struct {
	Store
	by time.Duration
}

func (c cachedEarlier) StatBlob(sha string) (cache.BlobInfo, error) {
	info, err := c.Store.StatBlob(sha)
	info.Created = info.Created.Add(-c.by)
	return info, err
}

// During a rolling upgrade, a replica of release 2.0.0 writes the last
// uses of the versions it serves in its own MAC format, which this
// release rejects. Such a last use counts, for the unused rule, as a use
// when the store wrote it (its Last-Modified, the store's time, which a
// writer of the bucket cannot set back or ahead): a version downloaded
// on the earlier release's replicas alone is kept, and once nothing
// writes its last use again for longer than the rule's age, it is
// removed. Before, a last use that did not authenticate was taken for
// none: the replica holding the lease removed from its cache and the
// bucket a version downloaded the day before.
func TestRetentionUnusedCountsRejectedSharedUseWhenWritten(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	srv.CreateBucket(bucket)
	sa := newSharedStore(t, srv, "a")
	clock := enginetest.NewFakeClock()
	clock.Add(-10 * 24 * time.Hour) // cached ten days ago
	a := newHarness(t, harnessOptions{cfg: mirror.Config{Now: clock.Now}, shared: sharedTier{sa},
		ret:       Config{UnusedAfter: 7 * 24 * time.Hour, Interval: -1},
		wrapStore: func(s Store) Store { return cachedEarlier{s, 10 * 24 * time.Hour} }})
	a.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
	a.readAll("1.0.0")
	a.waitIdle()
	clock.Set(time.Now())
	// Downloaded since on a replica of 2.0.0, which wrote its last use.
	putLastUseOfFormatOne(t, srv, packageKey(a.provider(), "1.0.0"), clock.Now().Add(-time.Hour))
	if done, err := a.ret.Prune(t.Context(), PruneRequest{}); err != nil || len(done) != 0 {
		t.Errorf("removed %v (%v); a replica of 2.0.0 recorded a use of 1.0.0 an hour ago", removalNames(done), err)
	}
	if sa.Rejected() == 0 {
		t.Fatal("the last use of format 1 was not read and rejected")
	}
	clock.Add(8 * 24 * time.Hour) // nobody wrote the last use again
	if done, err := a.ret.Prune(t.Context(), PruneRequest{}); err != nil || !reflect.DeepEqual(removalNames(done), []string{"1.0.0 unused"}) {
		t.Errorf("8 days later: removed %v (%v), want 1.0.0", removalNames(done), err)
	}
}
