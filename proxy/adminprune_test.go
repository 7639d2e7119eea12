package proxy

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/internal/fakeorigin"
	"github.com/tfmirror/tfmirror/mirror"
)

// POST /v1/prune: a dry run lists the rules' removals, the real one does
// them; named versions are checked.
func TestAdminPrune(t *testing.T) {
	h := newHarness(t, harnessOptions{origin: fakeorigin.Options{},
		engine: mirror.Config{Retention: mirror.Retention{KeepVersions: 1, Interval: -1}}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0", "2.0.0"}, platforms)
	for _, v := range []string{"1.0.0", "2.0.0"} {
		if r := h.get(archivePath(v, "linux_amd64")); r.status != 200 {
			t.Fatalf("archive %s: status %d", v, r.status)
		}
		h.waitCommitted(h.origin.SHA256(ns, typ, v, "linux_amd64"))
	}
	admin := NewAdmin(h.engine, nil, nil, AdminOptions{}).Handler()
	call := func(body string) (int, AdminPruned) {
		t.Helper()
		rec := httptest.NewRecorder()
		admin.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/prune", strings.NewReader(body)))
		var out AdminPruned
		if rec.Code == 200 {
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatal(err)
			}
		}
		return rec.Code, out
	}
	size := int64(len(h.origin.Archive(ns, typ, "1.0.0", "linux_amd64")))
	code, dry := call(`{"dry_run":true}`)
	if code != 200 || dry.Versions != 1 || dry.Bytes != size || dry.Removals[0].Version != "1.0.0" || dry.Removals[0].Rule != mirror.RuleKeepVersions {
		t.Fatalf("dry run: %d %+v", code, dry)
	}
	code, done := call(`{}`)
	if code != 200 || done.Versions != 1 || done.Bytes != size || done.DryRun {
		t.Errorf("prune: %d %+v", code, done)
	}
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"provider":"` + originHost + `/` + ns + `/` + typ + `"}`, 400},
		{`{"versions":["1.0.0"]}`, 400},
		{`{"provider":"nope","versions":["1.0.0"]}`, 400},
		{`{"provider":"` + originHost + `/` + ns + `/` + typ + `","versions":["9.0.0"]}`, 404},
		{`{"provider":"` + originHost + `/` + ns + `/` + typ + `","versions":["2.0.0"],"dry_run":true}`, 200},
	} {
		if code, _ := call(tc.body); code != tc.want {
			t.Errorf("%s: status %d, want %d", tc.body, code, tc.want)
		}
	}
}
