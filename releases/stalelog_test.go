package releases_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/observed"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// With the origin down, a cached list served stale to request after
// request logs the first few times at warn, not once a request: any
// client asking in a loop grew the log by a warning each.
func TestStaleListLoggedWithinABound(t *testing.T) {
	o := startOrigin(t)
	r := newRig(t, o, "", false)
	logs := &observed.Logs{}
	rel, err := releases.New(releases.Config{
		HashiCorpURL: o.HashiCorpURL, HashiCorpKeys: []string{o.HashiCorpKey},
		OpenTofuDownloadURL: o.OpenTofuDownloadURL, OpenTofuAPIURL: o.OpenTofuAPIURL, OpenTofuKeys: []string{o.OpenTofuKey},
		Logger: slog.New(logs), Now: r.clock.Now,
	}, r.client, r.engine, r.store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rel.Close)
	ctx := context.Background()
	if _, _, err := rel.Versions(ctx, releases.HashiCorp, "terraform"); err != nil {
		t.Fatal(err)
	}
	o.SetDown(true)
	r.clock.Add(time.Hour)
	const n = 200
	for range n {
		if _, st, err := rel.Versions(ctx, releases.HashiCorp, "terraform"); err != nil || !st.Stale {
			t.Fatalf("origin down: %+v %v, want the cached list, stale", st, err)
		}
	}
	warned := len(logs.AtLeast(slog.LevelWarn))
	if warned == 0 || warned > 20 {
		t.Errorf("%d lines at warn or above for %d requests of a stale list, want at least one and at most 20", warned, n)
	}
}
