package harness

import (
	"context"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/served"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// ReleasesSide is the CLI releases side on an engine and an in-memory
// cache, before a stand-in origin whose keys it trusts, and the same
// behind the engine's package policy (Served, what the releases door
// and sync are given); it ends with the test.
type ReleasesSide struct {
	Releases *releases.Releases
	Served   *served.Releases
	Engine   *mirror.Engine
	Store    *cache.Store
}

// StartReleasesSide builds a ReleasesSide before o, cfg completed with
// o's URLs and keys (HashiCorp's unless cfg names its own); with
// cfg.Offline, the engine is sealed too.
func StartReleasesSide(t testing.TB, o *fakeorigin.Releases, cfg releases.Config) *ReleasesSide {
	t.Helper()
	store := enginetest.OpenStore(t, "", cache.Options{})
	client, host := enginetest.ReleasesClient(t, o)
	engine, err := mirror.New(mirror.Config{AllowedOrigins: []string{host}, Logger: enginetest.Logger(t), Offline: cfg.Offline}, client, store)
	if err != nil {
		t.Fatal(err)
	}
	cfg.HashiCorpURL = o.HashiCorpURL
	if cfg.HashiCorpKeys == nil {
		cfg.HashiCorpKeys = []string{o.HashiCorpKey}
	}
	cfg.OpenTofuDownloadURL, cfg.OpenTofuAPIURL, cfg.OpenTofuKeys = o.OpenTofuDownloadURL, o.OpenTofuAPIURL, []string{o.OpenTofuKey}
	if cfg.Logger == nil {
		cfg.Logger = enginetest.Logger(t)
	}
	rel, err := releases.New(cfg, client, engine, store)
	if err != nil {
		t.Fatal(err)
	}
	// A list waits for its dating as serve sets it: as long as for its
	// own refresh (rel.ListWait).
	scfg := served.ReleasesConfig{Releases: rel, Policy: engine, Logger: cfg.Logger, Now: cfg.Now, ListWait: rel.ListWait()}
	if m, ok := cfg.Metrics.(served.CLIMetrics); ok {
		scfg.Metrics = m // the policy's refusals too
	}
	srel, err := served.NewReleases(scfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rel.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		engine.Shutdown(ctx) //nolint:errcheck // the test is over
		store.Close()
	})
	return &ReleasesSide{Releases: rel, Served: srel, Engine: engine, Store: store}
}
