package mirror

import (
	"context"
	"io"
	"log"
	"testing"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/leakcheck"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// originHost is the provider host the tests use; its name resolves, for
// the engine under test only, to the fake origin on loopback.
const originHost = enginetest.OriginHost

const (
	ns  = "hashicorp"
	typ = "random"
)

var platforms = []string{"darwin_arm64", "linux_amd64", "windows_amd64"}

// harness is an engine on a cache, in front of a fake origin.
type harness struct {
	t      *testing.T
	origin *fakeorigin.Origin
	store  *cache.Store
	engine *Engine
	closed bool
}

type harnessOptions struct {
	cfg      Config
	origin   fakeorigin.Options
	cacheDir string        // on-disk cache (to test restarts); "" = in memory
	store    cache.Options // further cache options (Dir and InMemory are set from cacheDir)
	// wrap, if set, stands between the engine and the cache.
	wrap func(Store) Store
	// wrapOrigin, if set, stands between the engine and the origin client.
	wrapOrigin func(Origin) Origin
}

func newHarness(t *testing.T, opts harnessOptions) *harness {
	t.Helper()
	h := &harness{t: t, origin: enginetest.StartOrigin(t, opts.origin)}
	h.start(opts)
	return h
}

// start (re)creates the engine on the harness's origin.
func (h *harness) start(opts harnessOptions) {
	t := h.t
	t.Helper()
	h.store = enginetest.OpenStore(t, opts.cacheDir, opts.store)
	cfg := opts.cfg
	if cfg.Logger == nil {
		cfg.Logger = enginetest.Logger(t)
	}
	if cfg.AllowedOrigins == nil {
		cfg.AllowedOrigins = []string{originHost}
	}
	var engineStore Store = h.store
	if opts.wrap != nil {
		engineStore = opts.wrap(h.store)
	}
	var origin Origin = enginetest.OriginClient(t, h.origin)
	if opts.wrapOrigin != nil {
		origin = opts.wrapOrigin(origin)
	}
	engine, err := New(cfg, origin, engineStore)
	if err != nil {
		t.Fatal(err)
	}
	h.engine = engine
	h.closed = false
	t.Cleanup(h.stop)
}

// stop shuts the engine down, then closes the cache.
func (h *harness) stop() {
	if h.closed {
		return
	}
	h.closed = true
	// Generous: a test whose origin answers late (SetLatency) leaves
	// fetch chains of several slow steps, slower still on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.engine.Shutdown(ctx); err != nil {
		h.t.Errorf("archive fetches still running: %v", err)
	}
	h.store.Close()
}

func (h *harness) provider() addrs.Provider {
	return addrs.Provider{Hostname: originHost, Namespace: ns, Type: typ}
}

func mustVersion(t *testing.T, s string) versions.Version {
	t.Helper()
	v, err := addrs.ParseSemver(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mustPlatform(t *testing.T, s string) addrs.Platform {
	t.Helper()
	pl, err := addrs.ParsePlatform(s)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// archive is what a reader of one archive got.
type archive struct {
	opened bool // OpenArchive succeeded
	body   []byte
	source records.Source
	err    error // opening or reading failed
}

// read opens the archive of version of the test provider for platform and
// reads it to the end.
func (h *harness) read(ctx context.Context, version, platform string) archive {
	h.t.Helper()
	a, err := h.engine.OpenArchive(ctx, h.provider(), mustVersion(h.t, version), mustPlatform(h.t, platform))
	if err != nil {
		return archive{err: err}
	}
	defer a.Close()
	body, err := io.ReadAll(a)
	return archive{opened: true, body: body, source: a.Source, err: err}
}

// packages returns the package metadata of version for platforms (nil: all).
func (h *harness) packages(version string, platforms ...string) (*Package, error) {
	h.t.Helper()
	var pls []addrs.Platform
	for _, pl := range platforms {
		pls = append(pls, mustPlatform(h.t, pl))
	}
	return h.engine.Package(context.Background(), h.provider(), mustVersion(h.t, version), pls)
}

// waitIdle waits until no archive fetch is running.
func (h *harness) waitIdle() { h.t.Helper(); enginetest.WaitIdle(h.t, h.engine.wait) }

// waitCommitted waits for fetches to end and checks sha is cached.
func (h *harness) waitCommitted(sha string) {
	h.t.Helper()
	enginetest.WaitCommitted(h.t, h.engine.wait, h.store, sha)
}

func TestMain(m *testing.M) {
	// Service discovery logs through the standard logger.
	log.SetOutput(io.Discard)
	leakcheck.Main(m)
}
