package admin

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/mirror/cachecheck"
)

// POST /v1/verify checks every cached package and lists the damaged one.
func TestAdminVerify(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	const ns, typ = "acme", "widget"
	a := h.newAPI(t, nil, nil, Options{})
	p := h.cacheWidget(t, a, "1.0.0", "2.0.0")
	size := int64(len(h.origin.Archive(ns, typ, "1.0.0", "linux_amd64")) + len(h.origin.Archive(ns, typ, "2.0.0", "linux_amd64")))
	_, post := socket(t, a)
	call := func() Verified {
		t.Helper()
		code, raw := post("/v1/verify", `{}`)
		var out Verified
		if code != 200 || json.Unmarshal(raw, &out) != nil {
			t.Fatalf("status %d: %s", code, raw)
		}
		return out
	}
	if got := call(); got.Checked != 2 || got.ByEvidence != 2 || got.Bytes != size || got.Failed != 0 || len(got.Failures) != 0 {
		t.Errorf("intact cache: %+v", got)
	}
	sha := h.origin.SHA256(ns, typ, "2.0.0", "linux_amd64")
	if err := cachetest.FlipBlobByte(h.store, sha, 0); err != nil {
		t.Fatal(err)
	}
	got := call()
	if got.Checked != 2 || got.Failed != 1 || len(got.Failures) != 1 {
		t.Fatalf("one damaged archive: %+v", got)
	}
	if f := got.Failures[0]; f.Address != p.String() || f.Version != "2.0.0" || f.Platform != "linux_amd64" ||
		f.SHA256 != sha || f.By != cachecheck.CheckedEvidence || f.Reason != "checksum_mismatch" ||
		!strings.Contains(f.Problem, "damaged where it is stored") {
		t.Errorf("failure %+v", f)
	}
}
