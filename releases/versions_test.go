package releases_test

import (
	"context"
	"testing"

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
