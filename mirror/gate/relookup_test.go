package gate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
)

// refusingTier is an outageTier whose reads of the record under one key
// fail for good (an object a writer of the bucket put there encrypted
// with a KMS key of its own: every GET of it is refused, AccessDenied,
// which is the store failing, not answering that it has none).
type refusingTier struct {
	outageTier
	key string
}

func (o refusingTier) GetMeta(ctx context.Context, key string) (json.RawMessage, time.Time, error) {
	if strings.HasSuffix(key, o.key) {
		o.datings.Add(1) // asked all the same
		return nil, time.Time{}, errNoAnswer
	}
	return o.outageTier.GetMeta(ctx, key)
}

// Replica a lists a module of 40 versions (its first listing: none has a
// dating record in the bucket). A writer of the bucket makes the dating
// key of one of them unreadable for good. Replica b starts with an empty
// cache and lists, taking a's list as the one before its own: one lookup
// goes unanswered, and b marks the address. Its next listings look that
// one up again alone, not every version of its own listing that has no
// dating (all 40, a provider's first listing: hundreds) per listing for
// good.
func TestReleaseAgeUnreadableRecordLookedUpAlone(t *testing.T) {
	r := newReplicas(t, "module")
	for i := range 40 {
		r.publish(fmt.Sprintf("1.%d.0", i))
	}
	r.listAt(r.a)

	cfg := r.cfg("b")
	cfg.Shared = refusingTier{cfg.Shared.(outageTier), r.datingKey("1.3.0")}
	b := r.replica(t, cfg)
	r.listAt(b)
	var per []int64
	for range 4 {
		r.datings.Store(0)
		r.listAt(b)
		per = append(per, r.datings.Load())
	}
	if want := []int64{1, 1, 1, 1}; !slices.Equal(per, want) {
		t.Errorf("b's listings after its first asked the bucket for %v dating records, want %v (the unreadable one alone)", per, want)
	}
}

// Replica a lists 1.0.0 (the first listing), then 1.1.0. Replica b, with
// an empty cache, takes its first listing while the bucket does not
// answer; meanwhile a writer of the bucket deletes a's dating record of
// 1.1.0 (as TestReleaseAgeAnotherReplicasLaterListDatesABlindFirstListing).
// Once the bucket answers, b's next listing is a short answer of the
// origin that lacks 1.1.0: b records 1.1.0, undated in its own listing,
// as a version of the first listing (the zero time). 1.1.0 is published
// again; a lists (its list dates 1.1.0), then b lists taking a's list as
// the one before its own: the list's date of 1.1.0 takes the place of
// the record of the zero time, and b holds 1.1.0.
func TestReleaseAgeShortListingAfterABlindFirstListing(t *testing.T) {
	for _, kind := range []string{"provider", "module"} {
		t.Run(kind, func(t *testing.T) {
			r := newListedTwice(t, kind)
			b := r.blindReplica(t, "b")
			r.deleteRecord(t, r.datingKey("1.1.0"))
			r.withdraw("1.1.0")
			r.listAt(b) // short: lacks 1.1.0
			r.publish("1.1.0")
			r.listAt(r.a)
			r.listAt(b)
			r.listAt(b)
			heldOnEach(t, r, "1.1.0", r.first, map[string]*harness.Harness{"a": r.a, "b": b})
		})
	}
}

// A module of 301 minor version lines (0.9.0, 1.0.0 to 1.299.0); replica
// a lists it, then again with 1.10.1 published since (a backport into an
// old line: not among the 256 versions a first listing looks up); its
// dating record is in the bucket, nothing is deleted. During a rolling
// upgrade a replica of the earlier release lists the module again: the
// newest list in the bucket is then one without dates. Replica c, of
// this release, starts with an empty cache and lists, taking that list
// as the one before its own: a list that dates nothing, whose versions'
// records it looks up all (not the 256 a list that dates has looked up),
// 1.10.1's among them, and c holds it.
func TestReleaseAgeEarlierReleasesListLooksAllUp(t *testing.T) {
	r := newLongListing(t)

	// An earlier release's replica lists again: the same versions, no dates.
	ctx := context.Background()
	old := r.open("old")
	key := "modversions/" + r.address
	raw, _, err := old.GetMeta(ctx, key)
	if err != nil || raw == nil {
		t.Fatalf("a's list in the bucket: %v", err)
	}
	var list map[string]any
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	if _, ok := list["dates"]; !ok {
		t.Fatal("a's list carries no dates")
	}
	delete(list, "dates")
	r.clock.Add(time.Hour)
	list["listed_at"] = r.clock.Now().UTC()
	if err := old.PutMeta(ctx, key, list); err != nil {
		t.Fatal(err)
	}

	c := r.replica(t, r.cfg("c"))
	r.listAt(c)
	heldOnEach(t, r, "1.10.1", r.first, map[string]*harness.Harness{"a": r.a, "c": c})
}
