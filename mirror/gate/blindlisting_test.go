package gate_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
)

// A module of 301 minor version lines (0.9.0, 1.0.0 to 1.299.0); replica
// a lists it, then again with 1.10.1 published since (a backport into
// an old line: not among the 256 versions a first listing looks up).
// a dates 1.10.1 by its first listing. Replica b starts with an empty
// cache while the bucket does not answer (its first listing blind), and
// lists again once the bucket answers; replica c starts afterwards with
// an empty cache. Nothing is deleted from the bucket. Every replica
// holds 1.10.1 for the minimum release age from a's first listing: a
// version one replica dated is dated on every replica.
func TestReleaseAgeBlindListingOfALongListingLooksAllUpAgain(t *testing.T) {
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
	rig := newReleaseRig(t, "module", a.Origin, time.Time{})
	listAt := func(h *harness.Harness) time.Time {
		t.Helper()
		clock.Add(time.Hour)
		rig.list(h)
		h.WaitIdle()
		return clock.Now()
	}
	rig.publish("0.9.0")
	for i := range 300 {
		rig.publish(fmt.Sprintf("1.%d.0", i))
	}
	first := listAt(a)
	rig.publish("1.10.1")
	listAt(a)

	down.Store(true)
	b := &harness.Harness{T: t, Origin: a.Origin}
	b.Start(harness.Options{Config: cfg("b")})
	listAt(b)
	down.Store(false)
	listAt(b) // the bucket answers again

	c := &harness.Harness{T: t, Origin: a.Origin}
	c.Start(harness.Options{Config: cfg("c")})
	listAt(c)

	pol := enginetest.DecodePolicy(t, `minimum_release_age = "168h"`)
	for _, name := range []string{"a", "b", "c"} {
		h := map[string]*harness.Harness{"a": a, "b": b, "c": c}[name]
		h.Engine.SetPolicy(pol)
		heldUntil(t, "replica "+name+": 1.10.1", rig.verdict(h, "1.10.1"), first.Add(168*time.Hour))
		if err := rig.verdict(h, "1.0.0"); err != nil {
			t.Errorf("replica %s: 1.0.0, of the first listing: %v, want it served", name, err)
		}
	}
}

// Replica a lists 1.0.0 (the first listing), then 1.1.0; replica b,
// with an empty cache, takes its first listing while the bucket does not
// answer; meanwhile a writer of the bucket deletes a's dating record of
// 1.1.0. The bucket answers again: b lists (its lookup of 1.1.0 finds
// nothing), then a lists again (its list dates 1.1.0), then b lists
// again, taking a's newer list, which dates 1.1.0, as the one before its
// own. b holds 1.1.0 from then on, and so does replica c started with an
// empty cache afterwards.
func TestReleaseAgeAnotherReplicasLaterListDatesABlindFirstListing(t *testing.T) {
	for _, kind := range []string{"provider", "module"} {
		t.Run(kind, func(t *testing.T) {
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
			listAt := func(h *harness.Harness) time.Time {
				t.Helper()
				clock.Add(time.Hour)
				rig.list(h)
				h.WaitIdle()
				return clock.Now()
			}
			rig.publish("1.0.0")
			first := listAt(a)
			rig.publish("1.1.0")
			listAt(a)

			down.Store(true)
			b := &harness.Harness{T: t, Origin: a.Origin}
			b.Start(harness.Options{Config: cfg("b")})
			listAt(b)
			object := "replicas/meta/release/absent/" + rig.kind + "/" + rig.address + "/1.1.0"
			if _, err := srv.Client().DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String("tfm"), Key: aws.String(object)}); err != nil {
				t.Fatal(err)
			}
			down.Store(false)
			listAt(b)
			listAt(a)
			listAt(b)

			c := &harness.Harness{T: t, Origin: a.Origin}
			c.Start(harness.Options{Config: cfg("c")})
			listAt(c)

			pol := enginetest.DecodePolicy(t, `minimum_release_age = "168h"`)
			for _, name := range []string{"a", "b", "c"} {
				h := map[string]*harness.Harness{"a": a, "b": b, "c": c}[name]
				h.Engine.SetPolicy(pol)
				heldUntil(t, "replica "+name+": 1.1.0", rig.verdict(h, "1.1.0"), first.Add(168*time.Hour))
			}
		})
	}
}
