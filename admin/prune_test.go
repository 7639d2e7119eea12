package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/retention"
)

// POST /v1/prune: a dry run lists the rules' removals, the real one does
// them; named versions are checked.
func TestAdminPrune(t *testing.T) {
	h := newHarness(t, harnessOptions{retention: retention.Config{KeepVersions: 1, Interval: -1}})
	const ns, typ = "acme", "widget"
	a := h.newAPI(t, nil, nil, Options{})
	p := h.cacheWidget(t, a, "1.0.0", "2.0.0")
	_, post := socket(t, a)
	call := func(body string) (int, Pruned) {
		t.Helper()
		code, raw := post("/v1/prune", body)
		var out Pruned
		if code == 200 {
			if err := json.Unmarshal(raw, &out); err != nil {
				t.Fatal(err)
			}
		}
		return code, out
	}
	size := int64(len(h.origin.Archive(ns, typ, "1.0.0", "linux_amd64")))
	code, dry := call(`{"dry_run":true}`)
	if code != 200 || dry.Versions != 1 || dry.Bytes != size || dry.Removals[0].Version != "1.0.0" || dry.Removals[0].Rule != retention.RuleKeepVersions {
		t.Fatalf("dry run: %d %+v", code, dry)
	}
	code, done := call(`{}`)
	if code != 200 || done.Versions != 1 || done.Bytes != size || done.DryRun {
		t.Errorf("prune: %d %+v", code, done)
	}
	addr := `"` + p.String() + `"`
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"provider":` + addr + `}`, 400},
		{`{"versions":["1.0.0"]}`, 400},
		{`{"provider":"nope","versions":["1.0.0"]}`, 400},
		{`{"provider":` + addr + `,"module":"a/b/c","versions":["1.0.0"]}`, 400},
		{`{"provider":` + addr + `,"versions":["9.0.0"]}`, 404},
		{`{"provider":` + addr + `,"versions":["2.0.0"],"dry_run":true}`, 200},
		{`{"cli":"terraform"}`, 400},
		{`{"cli":"terraform-provider-aws","versions":["1.0.0"]}`, 400},
		{`{"cli":"terraform","module":"a/b/c","versions":["1.0.0"]}`, 400},
		{`{"cli":"terraform","versions":["1.6.0"]}`, 404},
	} {
		if code, _ := call(tc.body); code != tc.want {
			t.Errorf("%s: status %d, want %d", tc.body, code, tc.want)
		}
	}
}

// The admin API needs the engine's pruner: without it, New fails rather
// than giving an API whose prune does nothing.
func TestNewRequiresPruner(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	if _, err := New(h.engine, h.packages(t), nil, nil, nil, Options{}); err == nil {
		t.Error("New took no pruner")
	}
	if _, err := New(nil, h.packages(t), h.retention, nil, nil, Options{}); err == nil {
		t.Error("New took no engine")
	}
	if _, err := New(h.engine, nil, h.retention, nil, nil, Options{}); err == nil {
		t.Error("New took no packages behind the policy")
	}
}

// pinnedPruner refuses every prune as retention refuses one naming a
// pinned version.
type pinnedPruner struct{}

func (pinnedPruner) Prune(context.Context, retention.PruneRequest) ([]retention.Removal, error) {
	return nil, fmt.Errorf("provider example.com/acme/widget version 1.0.0 is pinned by pins/team.lock.hcl:3: %w", retention.ErrPinned)
}

// A prune naming a pinned version is the operator's to fix (remove the
// pin first): 409 with retention's reason, not a server error.
func TestAdminPrunePinnedRefused(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	a, err := New(h.engine, h.packages(t), pinnedPruner{}, nil, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, post := socket(t, a)
	code, body := post("/v1/prune", `{"provider":"example.com/acme/widget","versions":["1.0.0"]}`)
	if code != http.StatusConflict || !strings.Contains(string(body), "pins/team.lock.hcl:3") {
		t.Errorf("prune of a pinned version: %d %s; want 409 naming the pin", code, body)
	}
}

// TestPruneCLIOfAnEarlierServe: `tfmirror cache prune --cli` of this
// release asking a serve of 2.0.0, which reads no CLI field and so sees
// versions of nothing, is told that the serve does not prune CLI
// releases, not that its versions name no provider or module.
func TestPruneCLIOfAnEarlierServe(t *testing.T) {
	dir := t.TempDir()
	ln, err := Listen(dir)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/prune", func(w http.ResponseWriter, r *http.Request) {
		var req struct { // 2.0.0's PruneRequest
			DryRun   bool     `json:"dry_run"`
			Provider string   `json:"provider,omitempty"`
			Module   string   `json:"module,omitempty"`
			Versions []string `json:"versions,omitempty"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Provider != "" || req.Module != "" || len(req.Versions) == 0 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(ErrorBody{Error: "versions name no provider or module"})
	})
	srv := &http.Server{Handler: mux}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-done })
	c, err := Dial(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Prune(context.Background(), PruneRequest{DryRun: true, CLI: "terraform", Versions: []string{"1.6.0"}})
	if err == nil || !strings.Contains(err.Error(), "does not prune CLI releases (is it of an earlier release? restart it)") {
		t.Fatalf("prune of a CLI version by an earlier serve: %v", err)
	}
}
