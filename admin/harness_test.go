package admin

import (
	"context"
	"io"
	"log"
	"os"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/cache"
	"github.com/tfmirror/tfmirror/internal/enginetest"
	"github.com/tfmirror/tfmirror/internal/fakeorigin"
	"github.com/tfmirror/tfmirror/mirror"
)

// originHost is the provider host the tests use; its name resolves, for
// the engine under test only, to the fake origin on loopback.
const originHost = enginetest.OriginHost

// harness is an engine on a fake origin, with an in-memory cache.
type harness struct {
	origin *fakeorigin.Origin
	store  *cache.Store
	engine *mirror.Engine
}

type harnessOptions struct {
	engine mirror.Config // AllowedOrigins defaults to originHost
}

func newHarness(t *testing.T, opts harnessOptions) *harness {
	t.Helper()
	h := &harness{origin: enginetest.StartOrigin(t, fakeorigin.Options{}), store: enginetest.OpenStore(t, "", cache.Options{})}
	cfg := opts.engine
	if cfg.Logger == nil {
		cfg.Logger = enginetest.Logger(t)
	}
	if cfg.AllowedOrigins == nil {
		cfg.AllowedOrigins = []string{originHost}
	}
	engine, err := mirror.New(cfg, enginetest.OriginClient(t, h.origin), h.store)
	if err != nil {
		t.Fatal(err)
	}
	h.engine = engine
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := engine.Shutdown(ctx); err != nil {
			t.Errorf("archive fetches still running: %v", err)
		}
		h.store.Close()
	})
	return h
}

func TestMain(m *testing.M) {
	// Service discovery logs through the standard logger.
	log.SetOutput(io.Discard)
	os.Exit(m.Run())
}
