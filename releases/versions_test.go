package releases_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/failure"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// A version whose numeric part does not fit in 64 bits, in the origin's
// list or in a request, is not a version: the list is served without it
// and the request is answered not found. (The version parser panics on
// such a part; from the origin's list that panic would end the process.)
func TestOutOfRangeVersions(t *testing.T) {
	const huge = "99999999999999999999.0.0"
	o := startOrigin(t)
	o.Add("hashicorp", "terraform", huge, "linux_amd64")
	o.Add("opentofu", "tofu", huge, "linux_amd64")
	r := newRig(t, o, "", false)
	ctx := context.Background()
	for _, tc := range []struct {
		pub     releases.Publisher
		product string
		want    string
	}{
		{releases.HashiCorp, "terraform", "1.6.0"},
		{releases.OpenTofu, "tofu", "1.8.0"},
	} {
		list, _, err := r.rel.Versions(ctx, tc.pub, tc.product)
		if err != nil {
			t.Fatalf("%s: Versions: %v", tc.pub, err)
		}
		if len(list.Versions) == 0 || list.Versions[0].Version != tc.want {
			t.Errorf("%s: Versions %+v, want %s first", tc.pub, list.Versions, tc.want)
		}
		for _, l := range list.Versions {
			if l.Version == huge {
				t.Errorf("%s: %s listed", tc.pub, huge)
			}
		}
		for _, v := range []string{huge, "1." + huge, "1.0.0-rc.99999999999999999999"} {
			if _, err := r.rel.Sums(ctx, tc.pub, tc.product, v); !isNotFound(err) {
				t.Errorf("%s: Sums(%q): %v, want ErrNotFound", tc.pub, v, err)
			}
		}
	}
}

// TestLongListKeepsTheNewest: an origin listing more versions than a list
// takes (10,000) has its newest kept and its oldest left out, the same
// ones at every fetch, whatever order the document gives them in
// (HashiCorp's index.json is an object, whose members have no order;
// OpenTofu's api.json an array, here oldest first). Taken as they came,
// the newest release could be left out, and a different one at each
// refresh, each listed anew (and dated by the listing rule) when it came
// back.
func TestLongListKeepsTheNewest(t *testing.T) {
	const taken, extra = 10000, 10
	o, err := fakeorigin.StartReleases()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	var all []string
	for i := range taken + extra { // oldest first
		v := fmt.Sprintf("1.%d.%d", i/100, i%100)
		all = append(all, v)
		o.Add("hashicorp", "terraform", v)
		o.Add("opentofu", "tofu", v)
	}
	slices.Reverse(all)
	want := all[:taken]
	r := newRig(t, o, "", false)
	for _, tc := range []struct {
		pub     releases.Publisher
		product string
	}{{releases.HashiCorp, "terraform"}, {releases.OpenTofu, "tofu"}} {
		list, _, err := r.rel.Versions(context.Background(), tc.pub, tc.product)
		if err != nil {
			t.Fatalf("%s: %v", tc.pub, err)
		}
		got := make([]string, 0, len(list.Versions))
		for _, l := range list.Versions {
			got = append(got, l.Version)
		}
		if !slices.Equal(got, want) {
			missing := 0
			for _, v := range want {
				if !slices.Contains(got, v) {
					missing++
				}
			}
			t.Errorf("%s: %d versions listed, first %q; %d of the newest %d left out (want the newest %d, newest first)",
				tc.pub, len(got), got[:min(len(got), 1)], missing, taken, taken)
		}
	}
}

// TestLongListStillDated: a list the origin makes larger than the cache
// takes as one document (here 5 MiB of OpenTofu file names, on a cache
// whose limit is 4 MiB, that of a small --cache-max-bytes) is still
// stored, its oldest versions left out, so that a version the next list
// adds is dated by the listing rule. Stored not at all, every later list
// was a first one, and a version it added was dated by its signature
// alone: the origin could turn the listing rule off by padding its list.
func TestLongListStillDated(t *testing.T) {
	o, err := fakeorigin.StartReleases()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	for i := range 400 {
		v := fmt.Sprintf("1.%d.%d", i/100, i%100)
		o.Add("opentofu", "tofu", v, "linux_amd64")
		var names []string
		for j := range 120 {
			names = append(names, fmt.Sprintf("tofu_%s_%s_%d.tar.gz", v, strings.Repeat("x", 80), j))
		}
		o.ListFiles(v, names...)
	}
	r := newRigStore(t, o, t.TempDir(), false, cache.Options{MaxBytes: 64 << 20})
	ctx := context.Background()
	list, _, err := r.rel.Versions(ctx, releases.OpenTofu, "tofu")
	if err != nil || len(list.Versions) == 0 || list.Versions[0].Version != "1.3.99" {
		t.Fatalf("first list: %v", err)
	}
	o.Add("opentofu", "tofu", "1.9.0", "linux_amd64")
	r.clock.Add(time.Hour) // past the list's time to live
	list, st, err := r.rel.Versions(ctx, releases.OpenTofu, "tofu")
	for deadline := time.Now().Add(time.Minute); err == nil && st.Stale && time.Now().Before(deadline); {
		// The refresh of 5 MiB took longer than StaleAfter (a loaded
		// machine): the cached list was served while it goes on; a
		// call after it ended gets the list it fetched.
		time.Sleep(10 * time.Millisecond)
		list, st, err = r.rel.Versions(ctx, releases.OpenTofu, "tofu")
	}
	if err != nil || st.Stale || list.Versions[0].Version != "1.9.0" {
		t.Fatalf("second list: stale %v, %v; want the list it fetched, 1.9.0 the newest", st.Stale, err)
	}
	if at := r.rel.ListingTime(releases.OpenTofu, "tofu", "1.9.0"); at.IsZero() {
		t.Error("a version the second list added has no listing time: the first list was not kept")
	}
}

// TestMadeUpVersionsAskNoOrigin: a version the product's version list
// does not have is not found without asking the origin for its
// SHA256SUMS, as a provider version missing from its list is: a client
// naming made-up versions (there is no end of them) costs at most one
// list fetch a minute, not one origin request each. A release newer than
// the cached list is found once the list is a minute old (it is fetched
// again then).
func TestMadeUpVersionsAskNoOrigin(t *testing.T) {
	o := startOrigin(t)
	r := newRig(t, o, "", false)
	ctx := context.Background()
	if _, err := r.rel.Sums(ctx, releases.HashiCorp, "terraform", "1.6.0"); err != nil {
		t.Fatal(err)
	}
	before := o.TotalHits()
	for i := range 50 {
		for _, tc := range []struct {
			pub              releases.Publisher
			product, version string
		}{
			{releases.HashiCorp, "terraform", fmt.Sprintf("1.6.%d", i+1)},
			{releases.OpenTofu, "tofu", fmt.Sprintf("1.8.%d-made.up", i)},
		} {
			if _, err := r.rel.Sums(ctx, tc.pub, tc.product, tc.version); !isNotFound(err) {
				t.Fatalf("%s %s: %v, want not found", tc.product, tc.version, err)
			}
		}
	}
	if n := o.TotalHits() - before; n > 2 {
		t.Errorf("100 made-up versions made %d origin requests, want at most the two lists", n)
	}

	o.Add("hashicorp", "terraform", "1.6.1", "linux_amd64")
	r.clock.Add(2 * time.Minute)
	if _, err := r.rel.Sums(ctx, releases.HashiCorp, "terraform", "1.6.1"); err != nil {
		t.Errorf("a release published since the list was fetched, a minute on: %v", err)
	}

	// An origin that serves no list (here OpenTofu's list URL answers
	// 404) still serves its releases: only a list it answered refuses.
	side := harness.StartReleasesSide(t, o, releases.Config{})
	noList, err := releases.New(releases.Config{
		HashiCorpURL: o.HashiCorpURL, HashiCorpKeys: []string{o.HashiCorpKey},
		OpenTofuDownloadURL: o.OpenTofuDownloadURL, OpenTofuAPIURL: o.URL + "/tofu/no-list.json", OpenTofuKeys: []string{o.OpenTofuKey},
	}, r.client, side.Engine, side.Store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(noList.Close)
	if _, err := noList.Sums(ctx, releases.OpenTofu, "tofu", "1.8.0"); err != nil {
		t.Errorf("with no list at the origin: %v", err)
	}
}

// TestErrorAnsweredAsAListIsTheOrigins: an origin that answers a version
// list with 200 and something that has no versions in it (an error
// object, "{}", "null") has failed, as one answering 502 has: the list
// cached before is served, marked stale, not replaced by an empty one
// served fresh until it expires (and compared with the next as if every
// version had been withdrawn); with none cached, the answer is the
// origin's failure, not an empty list.
func TestErrorAnsweredAsAListIsTheOrigins(t *testing.T) {
	ctx := context.Background()
	bodies := []string{`{}`, `null`, `{"message":"API rate limit exceeded"}`, `{"versions":null}`, `[]`, `"versions"`}
	for _, tc := range []struct {
		pub     releases.Publisher
		product string
	}{{releases.HashiCorp, "terraform"}, {releases.OpenTofu, "tofu"}} {
		for _, body := range bodies {
			o := startOrigin(t)
			r := newRig(t, o, "", false)
			before, _, err := r.rel.Versions(ctx, tc.pub, tc.product)
			if err != nil || len(before.Versions) == 0 {
				t.Fatalf("%s: the list, origin up: %v (%d versions)", tc.pub, err, len(before.Versions))
			}
			o.SetListBody(string(tc.pub), tc.product, []byte(body))
			r.clock.Add(11 * time.Minute)
			after, st, err := r.rel.Versions(ctx, tc.pub, tc.product)
			if err != nil || !st.Stale || len(after.Versions) != len(before.Versions) {
				t.Errorf("%s answered %s once its list expired: %d versions, stale %v, err %v; want the %d cached, stale",
					tc.pub, body, len(after.Versions), st.Stale, err, len(before.Versions))
			}

			cold := newRig(t, o, "", false)
			var oe *failure.OriginError
			if list, _, err := cold.rel.Versions(ctx, tc.pub, tc.product); !errors.As(err, &oe) || oe.Kind != failure.OriginFailed {
				t.Errorf("%s answered %s, nothing cached: %d versions, err %v; want the origin's failure", tc.pub, body, len(list.Versions), err)
			}
		}
	}
}
