package proxy

import (
	"strings"
	"sync"
	"testing"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/retention"
)

// onePin pins one version, once.
type onePin struct {
	once sync.Once
	pins *retention.Pins
}

func (p *onePin) Pins() (*retention.Pins, bool, error) {
	changed := false
	p.once.Do(func() { changed = true })
	if !changed {
		return nil, false, nil
	}
	return p.pins, true, nil
}

// The status page lists pinned versions, and says when what may not be
// evicted exceeds the size limit.
func TestStatusRetention(t *testing.T) {
	t.Parallel()
	pins := &onePin{pins: &retention.Pins{Providers: map[string][]retention.PinSelection{
		originHost + "/" + ns + "/" + typ: {{Set: versions.Only(versions.MustParseVersion("1.0.0")), Where: "ci.lock.hcl:3"}},
	}}}
	h := newHarness(t, harnessOptions{origin: fakeorigin.Options{},
		ret: retention.Config{MaxBytes: 100, Interval: -1, Pins: pins}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	if r := h.get(archivePath("1.0.0", "linux_amd64")); r.status != 200 || r.err != nil {
		t.Fatalf("archive: status %d err %v", r.status, r.err)
	}
	h.waitCommitted(h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64"))
	if _, err := h.ret.Prune(t.Context(), retention.PruneRequest{}); err != nil { // as a pass: the status follows
		t.Fatal(err)
	}
	var st Status
	h.get("/?format=json").json(t, &st)
	if st.Retention == nil || len(st.Retention.Pinned) != 1 || st.Retention.Pinned[0].Version != "1.0.0" ||
		st.Retention.Pinned[0].Where != "ci.lock.hcl:3" || !st.Retention.LimitUnmet || st.Retention.KeptBytes != st.Bytes {
		t.Errorf("retention %+v, want 1.0.0 pinned and the limit unmet", st.Retention)
	}
	body := string(h.get("/").body)
	for _, want := range []string{`id="limit-unmet"`, "The size limit of 100 B cannot be met", `id="pinned"`, "1.0.0 <small>(provider, pinned by ci.lock.hcl:3)</small>"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q:\n%s", want, body)
		}
	}
}
