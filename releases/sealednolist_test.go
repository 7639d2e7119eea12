package releases_test

import (
	"context"
	"testing"

	"github.com/tfmirror/tfmirror/v2/releases"
)

// TestSealedListsWhatItHoldsWithoutAStoredList: an origin that serves no
// version list (an internal copy of the layout without PRODUCT/index.json,
// or a list that never read) is asked for each version as before, and
// what it answered is kept; sealed on that cache, the mirror lists the
// versions it holds (their SHA256SUMS and an archive cached), each with
// the builds it holds, as it would from a stored list, rather than
// failing every list for want of one.
func TestSealedListsWhatItHoldsWithoutAStoredList(t *testing.T) {
	o := startOrigin(t)
	dir := t.TempDir()
	o.SetListBody("hashicorp", "terraform", []byte("<html>no list here</html>"))
	online := newRig(t, o, dir, false)
	if _, _, err := online.read(releases.HashiCorp, "terraform", "1.6.0", tfZip); err != nil {
		t.Fatal(err)
	}
	online.waitIdle()
	online.stop()

	sealed := newRig(t, o, dir, true)
	list, _, err := sealed.rel.Versions(context.Background(), releases.HashiCorp, "terraform")
	if err != nil {
		t.Fatalf("sealed, the list: %v", err)
	}
	if len(list.Versions) != 1 || list.Versions[0].Version != "1.6.0" || len(list.Versions[0].Builds) != 1 ||
		list.Versions[0].Builds[0].Filename != tfZip {
		t.Errorf("sealed, the list: %+v, want 1.6.0 with %s alone", list.Versions, tfZip)
	}
	// OpenTofu's, of which nothing is held: an empty list.
	if list, _, err := sealed.rel.Versions(context.Background(), releases.OpenTofu, "tofu"); err != nil || len(list.Versions) != 0 {
		t.Errorf("sealed, OpenTofu's list: %+v %v, want an empty one", list, err)
	}
}
