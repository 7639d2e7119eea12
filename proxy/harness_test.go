package proxy

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/leakcheck"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/served"
	"github.com/tfmirror/tfmirror/v2/retention"
)

// originHost is the provider host the tests use; its name resolves, for
// the mirror under test only, to the fake origin on loopback.
const originHost = enginetest.OriginHost

type harness struct {
	t      *testing.T
	origin *fakeorigin.Origin
	store  *cache.Store
	engine *mirror.Engine
	ret    *retention.Retainer
	server *Server
	http   *httptest.Server
	dir    string
}

type harnessOptions struct {
	cfg      Config        // the front door's
	engine   mirror.Config // the engine's (AllowedOrigins defaults to originHost)
	ret      retention.Config
	origin   fakeorigin.Options
	cacheDir string        // on-disk cache (to test restarts); "" = in memory
	store    cache.Options // further cache options (Dir and InMemory are set from cacheDir)
}

func newHarness(t *testing.T, opts harnessOptions) *harness {
	t.Helper()
	h := &harness{t: t, dir: opts.cacheDir, origin: enginetest.StartOrigin(t, opts.origin)}
	h.start(opts)
	return h
}

// start (re)creates the mirror on the harness's origin.
func (h *harness) start(opts harnessOptions) {
	t := h.t
	t.Helper()
	h.store = enginetest.OpenStore(t, opts.cacheDir, opts.store)
	logger := enginetest.Logger(t)
	ecfg := opts.engine
	if ecfg.Logger == nil {
		ecfg.Logger = logger
	}
	if ecfg.AllowedOrigins == nil {
		ecfg.AllowedOrigins = []string{originHost}
	}
	engine, err := mirror.New(ecfg, enginetest.OriginClient(t, h.origin), h.store)
	if err != nil {
		t.Fatal(err)
	}
	h.engine = engine
	h.ret, err = retention.New(opts.ret, engine.Inventory(), h.store, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := opts.cfg
	if cfg.Retention == nil {
		cfg.Retention = h.ret
	}
	if cfg.Logger == nil {
		cfg.Logger = logger
	}
	if cfg.Health == nil {
		cfg.Health = &HealthSource{Store: h.store}
	}
	srv, err := New(cfg, packagesOf(t, engine))
	if err != nil {
		t.Fatal(err)
	}
	h.server = srv
	h.http = httptest.NewServer(srv)
	t.Cleanup(h.stop)
}

func (h *harness) stop() {
	if h.http == nil {
		return
	}
	h.http.Close()
	// Generous: a test whose origin answers late (SetLatency) leaves
	// fetch chains of several slow steps, slower still on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.engine.Shutdown(ctx); err != nil {
		h.t.Errorf("archive fetches still running: %v", err)
	}
	h.ret.Close()
	h.store.Close()
	h.http = nil
}

type response struct {
	status int
	header http.Header
	body   []byte
	err    error // reading the body failed (aborted transfer)
}

func (h *harness) get(path string, header ...string) response {
	h.t.Helper()
	return h.do(context.Background(), http.MethodGet, path, header...)
}

func (h *harness) do(ctx context.Context, method, path string, header ...string) response {
	h.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, h.http.URL+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := h.http.Client().Do(req)
	if err != nil {
		return response{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: body, err: err}
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

// waitIdle waits until no archive fetch is running.
func (h *harness) waitIdle() { h.t.Helper(); enginetest.WaitIdle(h.t, h.wait) }

// wait returns when no archive fetch is running, or ctx is done.
func (h *harness) wait(ctx context.Context) error { return mirror.WaitIdle(ctx, h.engine) }

// waitCommitted waits for fetches to end and checks sha is cached.
func (h *harness) waitCommitted(sha string) {
	h.t.Helper()
	enginetest.WaitCommitted(h.t, h.wait, h.store, sha)
}

func TestMain(m *testing.M) {
	// Service discovery logs through the standard logger.
	log.SetOutput(io.Discard)
	leakcheck.Main(m)
}

// packagesOf is engine behind its package policy, as the front door
// takes it (package mirror/served), without an OCI side.
func packagesOf(t testing.TB, engine *mirror.Engine) *served.Packages {
	t.Helper()
	p, err := served.New(served.Parts{Providers: engine, Modules: engine.Modules(), Zips: engine.Modules().Zips()})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
