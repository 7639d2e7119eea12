package releases_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// TestSealedCosignFileNotHeld: a sealed mirror that holds an OpenTofu
// version but not its cosign signature or certificate (never asked for
// before it was sealed, or carried by a bundle without them) answers
// them not found (404), as it answers every file it does not hold, not
// as an origin it may reach later (503): nothing will change until it is
// unsealed, and an installer retrying a 503 retries in vain.
func TestSealedCosignFileNotHeld(t *testing.T) {
	o := startOrigin(t)
	dir := t.TempDir()
	online := newRig(t, o, dir, false)
	if _, _, err := online.read(releases.OpenTofu, "tofu", "1.8.0", tofuZip); err != nil {
		t.Fatal(err)
	}
	online.waitIdle()
	online.stop()
	before := o.TotalHits()

	r := newRig(t, o, dir, true)
	ctx := context.Background()
	for _, name := range []string{"tofu_1.8.0_SHA256SUMS.sig", "tofu_1.8.0_SHA256SUMS.pem"} {
		_, err := r.rel.Document(ctx, releases.OpenTofu, "tofu", "1.8.0", name)
		if !isNotFound(err) || !errors.Is(err, records.ErrOffline) {
			t.Errorf("%s, not held by the sealed mirror: %v, want ErrNotFound (and ErrOffline, saying why)", name, err)
		}
	}
	if n := o.TotalHits(); n != before {
		t.Errorf("the sealed mirror made %d origin requests", n-before)
	}
}
