package retention

import (
	"reflect"
	"slices"
	"testing"

	mirrorheld "github.com/tfmirror/tfmirror/v2/mirror/inventory"
)

// keep-versions keeps the same versions of the same holdings whatever
// order they are read in (the cache's records, the bucket's listing):
// versions of the same precedence (1.2.0+a and 1.2.0+b, which semver
// does not order) are ordered by their spelling, the greater the newer.
func TestKeepVersionsOrdersBuildsByTheirSpelling(t *testing.T) {
	t.Parallel()
	r := &Retainer{cfg: Config{KeepVersions: 2}}
	mk := func(raw string) *held {
		return &held{Record: mirrorheld.Record{Kind: "provider", Address: "example.com/ns/t", Raw: raw,
			Version: mustVersion(t, raw), Refetch: true, Archives: []string{raw}}, cached: map[string]int64{raw: 1}}
	}
	raws := []string{"1.2.0+c", "1.2.0+a", "1.1.0", "1.2.0+b", "1.2.0-rc.1+x", "1.2.0-rc.1+y", "1.0.0+z", "1.0.0+y"}
	var want []string
	for i := range len(raws) {
		// Each rotation of the holdings.
		var hs []*held
		for j := range raws {
			hs = append(hs, mk(raws[(i+j)%len(raws)]))
		}
		var removed []string
		for h := range r.byRules(hs) {
			removed = append(removed, h.Raw)
		}
		slices.Sort(removed)
		if i == 0 {
			want = []string{"1.0.0+y", "1.0.0+z", "1.1.0", "1.2.0+a", "1.2.0-rc.1+x", "1.2.0-rc.1+y"}
		}
		if !reflect.DeepEqual(removed, want) {
			t.Errorf("holdings read from %s on: removed %v, want %v", raws[i], removed, want)
		}
	}
}
