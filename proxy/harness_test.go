package proxy

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/cache"
	"github.com/tfmirror/tfmirror/discovery"
	"github.com/tfmirror/tfmirror/internal/fakeorigin"
	"github.com/tfmirror/tfmirror/mirror"
)

// originHost is the provider host the tests use; its name resolves, for
// the mirror under test only, to the fake origin on loopback.
const originHost = "registry.terraform.io"

type harness struct {
	t      *testing.T
	origin *fakeorigin.Origin
	store  *cache.Store
	engine *mirror.Engine
	server *Server
	http   *httptest.Server
	dir    string
}

type harnessOptions struct {
	cfg      Config        // the front door's
	engine   mirror.Config // the engine's (AllowedOrigins defaults to originHost)
	origin   fakeorigin.Options
	cacheDir string        // on-disk cache (to test restarts); "" = in memory
	store    cache.Options // further cache options (Dir and InMemory are set from cacheDir)
}

func newHarness(t *testing.T, opts harnessOptions) *harness {
	t.Helper()
	h := &harness{t: t, dir: opts.cacheDir}
	if opts.origin.Hostnames == nil {
		opts.origin.Hostnames = []string{originHost}
	}
	origin, err := fakeorigin.Start(opts.origin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	h.origin = origin
	h.start(opts)
	return h
}

// start (re)creates the mirror on the harness's origin.
func (h *harness) start(opts harnessOptions) {
	t := h.t
	t.Helper()
	copts := opts.store
	copts.Dir, copts.InMemory = opts.cacheDir, opts.cacheDir == ""
	store, err := cache.Open(copts)
	if err != nil {
		t.Fatal(err)
	}
	h.store = store
	client, err := discovery.New(discovery.Config{
		AllowPrivate: true,
		RootCAs:      h.origin.CertPool(),
		DialContext:  h.dialer(),
	})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ecfg := opts.engine
	if ecfg.Logger == nil {
		ecfg.Logger = logger
	}
	if ecfg.AllowedOrigins == nil {
		ecfg.AllowedOrigins = []string{originHost}
	}
	engine, err := mirror.New(ecfg, client, store)
	if err != nil {
		t.Fatal(err)
	}
	h.engine = engine
	cfg := opts.cfg
	if cfg.Logger == nil {
		cfg.Logger = logger
	}
	if cfg.Health == nil {
		cfg.Health = &HealthSource{Store: store}
	}
	srv, err := New(cfg, engine)
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.engine.Shutdown(ctx); err != nil {
		h.t.Errorf("archive fetches still running: %v", err)
	}
	h.store.Close()
	h.http = nil
}

// dialer sends the test's provider host names to the fake origin.
func (h *harness) dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err == nil && host != "127.0.0.1" && host != "localhost" {
			addr = h.origin.Addr
		}
		return d.DialContext(ctx, network, addr)
	}
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
func (h *harness) waitIdle() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.engine.Wait(ctx); err != nil {
		h.t.Fatalf("archive fetch did not end: %v", err)
	}
}

// waitCommitted waits for fetches to end and checks sha is cached.
func (h *harness) waitCommitted(sha string) {
	h.t.Helper()
	h.waitIdle()
	if _, err := h.store.StatBlob(sha); err != nil {
		h.t.Fatalf("archive %s not cached: %v", sha, err)
	}
}

type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func TestMain(m *testing.M) {
	// Service discovery logs through the standard logger.
	log.SetOutput(io.Discard)
	os.Exit(m.Run())
}
