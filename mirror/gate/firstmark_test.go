package gate_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// datingKey is the name of a version's dating record (of a provider's or
// a module's listing) in the shared store, under the bucket's prefix, and
// in the cache (key).
func datingKey(h *harness.Harness, kind, v string) (object, key string) {
	address := harness.Module.String()
	if kind == "provider" {
		address = h.Provider().String()
	}
	key = "release/absent/" + kind + "/" + address + "/" + v
	return "replicas/meta/" + key, key
}

// heldUntil checks the verdict of replica name (h) on version v: served
// when until is zero, else held by the minimum release age until then.
func heldUntil(t *testing.T, ops kindOps, name string, h *harness.Harness, v string, until time.Time) {
	t.Helper()
	err := ops.verdict(h, v)
	var perr *gate.PolicyError
	switch {
	case until.IsZero() && err != nil:
		t.Errorf("replica %s: %s, of a's first listing: %v, want it served", name, v, err)
	case !until.IsZero() && (!errors.As(err, &perr) || perr.Verdict.Rule != policy.RuleMinReleaseAge || !perr.Verdict.AvailableAt.Equal(until)):
		t.Errorf("replica %s: %s: %v, want held by the minimum release age until %v", name, v, err, until)
	}
}

// inBucket says which of vs have a dating record in the bucket.
func inBucket(srv *s3test.Server, h *harness.Harness, kind string, vs ...string) []string {
	keys := srv.Keys("tfm", "replicas/meta/release/absent/")
	var out []string
	for _, v := range vs {
		if obj, _ := datingKey(h, kind, v); slices.Contains(keys, obj) {
			out = append(out, v)
		}
	}
	return out
}

// A writer of the bucket without the replicas' key deletes the dating
// record of 1.1.0, first listed an hour ago by replica a. Replica c,
// started then with an empty cache, finds 1.1.0 named by a's version
// list and no record of when it was first listed: it took it for a
// version of the first listing and served it at once, however young,
// while a held it. It dates it by its own first sight now, and holds it
// for the minimum release age from then: deleting the record denies
// service, it serves nothing sooner. 1.0.0, of a's first listing, is
// served by c through the record a wrote of it, as such.
func TestDatingRecordDeletedHoldsTheVersion(t *testing.T) {
	for _, kind := range []string{"provider", "module"} {
		t.Run(kind, func(t *testing.T) {
			open, srv := sharedBucketOn(t)
			clock := enginetest.NewFakeClock()
			start := time.Now().Truncate(time.Second)
			clock.Set(start)
			cfg := func(name string) harness.Config {
				return harness.Config{Now: clock.Now, VersionsTTL: time.Minute, Shared: open(name)}
			}
			a := harness.New(t, harness.Options{Config: cfg("a")})
			ops := opsOf(t, kind, a.Origin, start.Add(-365*day))
			listAt := func(h *harness.Harness) time.Time {
				t.Helper()
				clock.Add(time.Hour)
				ops.list(h)
				h.WaitIdle()
				return clock.Now()
			}
			ops.publish("1.0.0")
			first := listAt(a)
			ops.publish("1.1.0")
			listAt(a)
			if got := inBucket(srv, a, kind, "1.0.0", "1.1.0"); !slices.Equal(got, []string{"1.0.0", "1.1.0"}) {
				t.Errorf("dating records in the bucket: %v, want 1.0.0's (of the first listing) and 1.1.0's", got)
			}
			obj, _ := datingKey(a, kind, "1.1.0")
			if _, err := srv.Client().DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String("tfm"), Key: aws.String(obj)}); err != nil {
				t.Fatal(err)
			}

			c := &harness.Harness{T: t, Origin: a.Origin}
			c.Start(harness.Options{Config: cfg("c")})
			seen := listAt(c)

			pol := enginetest.DecodePolicy(t, `minimum_release_age = "72h"`)
			a.Engine.SetPolicy(pol)
			c.Engine.SetPolicy(pol)
			heldUntil(t, ops, "a", a, "1.0.0", time.Time{})
			heldUntil(t, ops, "a", a, "1.1.0", first.Add(72*time.Hour))
			heldUntil(t, ops, "c", c, "1.0.0", time.Time{})
			heldUntil(t, ops, "c", c, "1.1.0", seen.Add(72*time.Hour))
		})
	}
}

// A bucket written by the previous release holds no record of the
// versions of the first listing: a replica kept that in its cache
// alone (none for a version its first listing named, a zero time for one
// a later listing lacked). A replica started with an empty cache holds
// them meanwhile (its own first sight dates them: the record is not in
// the bucket yet), and replica a, whose cache holds the mark, writes it
// to the bucket on its next listing, from which replicas started since
// serve them as a does.
func TestFirstListingMarkSharedOnTheNextListing(t *testing.T) {
	for _, kind := range []string{"provider", "module"} {
		t.Run(kind, func(t *testing.T) {
			open, srv := sharedBucketOn(t)
			clock := enginetest.NewFakeClock()
			start := time.Now().Truncate(time.Second)
			clock.Set(start)
			cfg := func(name string) harness.Config {
				return harness.Config{Now: clock.Now, VersionsTTL: time.Minute, Shared: open(name)}
			}
			dir := t.TempDir()
			a := harness.New(t, harness.Options{Config: cfg("a"), CacheDir: dir})
			ops := opsOf(t, kind, a.Origin, start.Add(-365*day))
			listAt := func(h *harness.Harness) time.Time {
				t.Helper()
				clock.Add(time.Hour)
				ops.list(h)
				h.WaitIdle()
				return clock.Now()
			}
			ops.publish("1.0.0")
			ops.publish("1.1.0")
			listAt(a)

			// As the previous release left them: 1.0.0 with no record
			// anywhere, 1.1.0 with a zero time in a's cache alone.
			for _, v := range []string{"1.0.0", "1.1.0"} {
				obj, _ := datingKey(a, kind, v)
				if _, err := srv.Client().DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String("tfm"), Key: aws.String(obj)}); err != nil {
					t.Fatal(err)
				}
			}
			_, key := datingKey(a, kind, "1.0.0")
			if err := a.Store.DeleteMeta(key); err != nil {
				t.Fatal(err)
			}
			_, key = datingKey(a, kind, "1.1.0")
			if err := a.Store.PutMeta(key, map[string]any{"schema": records.Schema, "at": time.Time{}}); err != nil {
				t.Fatal(err)
			}
			a.Stop()
			a.Start(harness.Options{Config: cfg("a"), CacheDir: dir})

			c1 := &harness.Harness{T: t, Origin: a.Origin}
			c1.Start(harness.Options{Config: cfg("c1")})
			seen := listAt(c1)
			if got := inBucket(srv, a, kind, "1.0.0", "1.1.0"); len(got) != 0 {
				t.Fatalf("dating records in the bucket after c1's listing: %v, want none (c1's own dating stays in its cache)", got)
			}

			listAt(a)
			if got := inBucket(srv, a, kind, "1.0.0", "1.1.0"); !slices.Equal(got, []string{"1.0.0", "1.1.0"}) {
				t.Errorf("dating records in the bucket after a's next listing: %v, want 1.0.0's and 1.1.0's", got)
			}
			c2 := &harness.Harness{T: t, Origin: a.Origin}
			c2.Start(harness.Options{Config: cfg("c2")})
			listAt(c2)

			pol := enginetest.DecodePolicy(t, `minimum_release_age = "72h"`)
			for name, h := range map[string]*harness.Harness{"a": a, "c1": c1, "c2": c2} {
				h.Engine.SetPolicy(pol)
				for _, v := range []string{"1.0.0", "1.1.0"} {
					until := time.Time{}
					if name == "c1" {
						until = seen.Add(72 * time.Hour)
					}
					heldUntil(t, ops, name, h, v, until)
				}
			}
		})
	}
}
