package releases_test

import (
	"context"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/releases"
)

// TestListFetchedInTheFutureIsRefreshed: a version list fetched while the
// clock was far ahead (set a month forward, then back) is not fresh until
// the clock catches up with it, as the engine's lists are not
// (mirror.TestListStoredInTheFutureIsRefreshed): it is fetched again once
// its time to live would have run out, and a release published since is
// listed and served, not answered 404 as one the list lacks for a month.
func TestListFetchedInTheFutureIsRefreshed(t *testing.T) {
	o := startOrigin(t)
	r := newRig(t, o, "", false)
	ctx := context.Background()
	r.clock.Add(30 * 24 * time.Hour)
	if _, _, err := r.rel.Versions(ctx, releases.HashiCorp, "terraform"); err != nil {
		t.Fatal(err)
	}
	r.clock.Add(-30 * 24 * time.Hour)
	o.Add("hashicorp", "terraform", "1.7.0", "linux_amd64")
	r.clock.Add(11 * time.Minute)
	list, _, err := r.rel.Versions(ctx, releases.HashiCorp, "terraform")
	if err != nil {
		t.Fatal(err)
	}
	if !list.Has("1.7.0") {
		t.Errorf("a list fetched a month ahead is still served after its time to live: %d versions, no 1.7.0", len(list.Versions))
	}
	if _, err := r.rel.Sums(ctx, releases.HashiCorp, "terraform", "1.7.0"); err != nil {
		t.Errorf("1.7.0, published since: %v", err)
	}
}

// TestMissingFileLearntInTheFutureIsAskedAgain: an optional file the
// origin lacked while the clock was far ahead is not remembered as
// missing until the clock catches up with it: once the time to live
// would have run out, the origin is asked again and the file it
// published since is served.
func TestMissingFileLearntInTheFutureIsAskedAgain(t *testing.T) {
	o := startOrigin(t)
	const sig = "tofu_1.8.0_SHA256SUMS.sig"
	o.Withhold(sig, true)
	r := newRig(t, o, "", false)
	ctx := context.Background()
	r.clock.Add(30 * 24 * time.Hour)
	if _, err := r.rel.Document(ctx, releases.OpenTofu, "tofu", "1.8.0", sig); !isNotFound(err) {
		t.Fatalf("%s the origin lacks: %v, want not found", sig, err)
	}
	r.clock.Add(-30 * 24 * time.Hour)
	o.Withhold(sig, false)
	r.clock.Add(11 * time.Minute)
	if _, err := r.rel.Document(ctx, releases.OpenTofu, "tofu", "1.8.0", sig); err != nil {
		t.Errorf("%s, published since, once the miss's time to live would have run out: %v", sig, err)
	}
}

// TestListingAheadOfTheClockDatesNoLaterThanNow: a release first listed
// by the list that follows one fetched while the clock was far ahead is
// dated no later than now (it was published before now), not at that
// list's time: under a minimum release age it would be held for the
// window and the month the clock was ahead besides.
func TestListingAheadOfTheClockDatesNoLaterThanNow(t *testing.T) {
	o := startOrigin(t)
	r := newRig(t, o, "", false)
	ctx := context.Background()
	r.clock.Add(30 * 24 * time.Hour)
	if _, _, err := r.rel.Versions(ctx, releases.HashiCorp, "terraform"); err != nil {
		t.Fatal(err)
	}
	r.clock.Add(-30 * 24 * time.Hour)
	o.Add("hashicorp", "terraform", "1.7.0", "linux_amd64")
	r.clock.Add(11 * time.Minute)
	if _, _, err := r.rel.Versions(ctx, releases.HashiCorp, "terraform"); err != nil {
		t.Fatal(err)
	}
	if at, now := r.rel.ListingTime(releases.HashiCorp, "terraform", "1.7.0"), r.clock.Now(); at.IsZero() || at.After(now) {
		t.Errorf("1.7.0, first listed now, is dated %s; want a time no later than now, %s", at, now)
	}
}
