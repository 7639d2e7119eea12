package gate_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
	"github.com/tfmirror/tfmirror/v2/mirror/sharedtier"
)

// outageTier is a bucketTier that does not answer while down is set:
// every call fails, as when the bucket is unreachable. datings counts
// the dating records asked of it.
type outageTier struct {
	bucketTier
	down    *atomic.Bool
	datings *atomic.Int64
}

var errNoAnswer = errors.New("dial tcp: connection refused")

func (o outageTier) GetMeta(ctx context.Context, key string) (json.RawMessage, time.Time, error) {
	if o.down.Load() {
		return nil, time.Time{}, errNoAnswer
	}
	if strings.Contains(key, "release/absent/") {
		o.datings.Add(1)
	}
	return o.bucketTier.GetMeta(ctx, key)
}

func (o outageTier) PutMeta(ctx context.Context, key string, record any) error {
	if o.down.Load() {
		return errNoAnswer
	}
	return o.bucketTier.PutMeta(ctx, key, record)
}

func (o outageTier) OpenArchive(ctx context.Context, sha string) (io.ReadCloser, int64, error) {
	if o.down.Load() {
		return nil, 0, errNoAnswer
	}
	return o.bucketTier.OpenArchive(ctx, sha)
}

func (o outageTier) PutArchive(ctx context.Context, sha string, r io.ReadSeeker, size int64) error {
	if o.down.Load() {
		return errNoAnswer
	}
	return o.bucketTier.PutArchive(ctx, sha, r, size)
}

func (o outageTier) TryLease(ctx context.Context, sha string) (sharedtier.Lease, error) {
	if o.down.Load() {
		return nil, errNoAnswer
	}
	return o.bucketTier.TryLease(ctx, sha)
}

// Replica a lists a provider or a module (1.0.0, the first listing),
// then again with 1.1.0 published since (a provider's signed a year
// ago). Replica b, started with an empty cache while the bucket does not
// answer, finds no list before its own and no dating record: its first
// listing is taken as the first ever (the bootstrap), and 1.1.0 is
// served meanwhile, as by a replica without a bucket. Once the bucket
// answers again, b listing again found 1.1.0 in its own listing and in
// the next, and never took a's dating of it: it served 1.1.0 for good,
// and its lists carried no date of it, so that with a's record deleted
// from the bucket a replica c with an empty cache, taking b's list as
// the one before its own, served it too. b looks the dating records up
// again once the bucket answers: 1.1.0 is held on b, and on c, for the
// minimum release age from a's first listing, and b's next listing asks
// the bucket for no dating record. So too when, while the bucket did not
// answer, a short listing of the origin lacked 1.1.0 (recorded then, on
// b, as a version of the first listing) and the next named it again.
func TestReleaseAgeFirstListingWhileTheBucketDidNotAnswer(t *testing.T) {
	for _, tc := range []struct {
		kind  string
		short bool
	}{{"provider", false}, {"module", false}, {"provider", true}, {"module", true}} {
		name := tc.kind
		if tc.short {
			name += " through a short listing"
		}
		t.Run(name, func(t *testing.T) {
			kind := tc.kind
			srv := s3test.Start(t)
			open := bucketOn(t, srv)
			clock := enginetest.NewFakeClock()
			start := time.Now().Truncate(time.Second)
			clock.Set(start)
			var down atomic.Bool
			var datings atomic.Int64
			cfg := func(name string) harness.Config {
				return harness.Config{Now: clock.Now, VersionsTTL: time.Minute, Shared: outageTier{open(name), &down, &datings}}
			}
			a := harness.New(t, harness.Options{Config: cfg("a")})
			rig := newReleaseRig(t, kind, a.Origin, start.Add(-365*day))
			listAt := func(h *harness.Harness) {
				t.Helper()
				clock.Add(time.Hour)
				rig.list(h)
				h.WaitIdle()
			}
			rig.publish("1.0.0")
			listAt(a)
			first := clock.Now()
			rig.publish("1.1.0")
			listAt(a)

			pol := enginetest.DecodePolicy(t, `minimum_release_age = "168h"`)
			down.Store(true)
			b := &harness.Harness{T: t, Origin: a.Origin}
			b.Start(harness.Options{Config: cfg("b")})
			listAt(b)
			b.Engine.SetPolicy(pol)
			if err := rig.verdict(b, "1.1.0"); err != nil {
				t.Errorf("replica b, its first listing taken while the bucket did not answer: 1.1.0: %v, want it served meanwhile", err)
			}
			b.WaitIdle()
			if tc.short {
				rig.withdraw("1.1.0")
				listAt(b)
				rig.publish("1.1.0")
			}

			down.Store(false)
			listAt(b)
			heldUntil(t, "replica b, listing again once the bucket answers: 1.1.0", rig.verdict(b, "1.1.0"), first.Add(168*time.Hour))
			if err := rig.verdict(b, "1.0.0"); err != nil {
				t.Errorf("replica b: 1.0.0, of the first listing: %v, want it served", err)
			}
			b.WaitIdle()
			datings.Store(0)
			listAt(b)
			if n := datings.Load(); n != 0 {
				t.Errorf("replica b's listing after the bucket answered its lookups asked it for %d dating records, want none", n)
			}

			ctx := context.Background()
			object := "replicas/meta/release/absent/" + rig.kind + "/" + rig.address + "/1.1.0"
			if _, err := srv.Client().HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("tfm"), Key: aws.String(object)}); err != nil {
				t.Fatalf("the bucket has no %s to delete: %v", object, err)
			}
			if _, err := srv.Client().DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("tfm"), Key: aws.String(object)}); err != nil {
				t.Fatal(err)
			}
			c := &harness.Harness{T: t, Origin: a.Origin}
			c.Start(harness.Options{Config: cfg("c")})
			listAt(c)
			c.Engine.SetPolicy(pol)
			heldUntil(t, "replica c, with an empty cache, the record deleted: 1.1.0", rig.verdict(c, "1.1.0"), first.Add(168*time.Hour))
			if err := rig.verdict(c, "1.0.0"); err != nil {
				t.Errorf("replica c: 1.0.0, of the first listing: %v, want it served", err)
			}
		})
	}
}
