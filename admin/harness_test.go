package admin

import (
	"context"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/leakcheck"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/served"
	"github.com/tfmirror/tfmirror/v2/retention"
)

// originHost is the provider host the tests use; its name resolves, for
// the engine under test only, to the fake origin on loopback.
const originHost = enginetest.OriginHost

// harness is an engine on a fake origin, with an in-memory cache and
// its retention.
type harness struct {
	origin    *fakeorigin.Origin
	store     *cache.Store
	engine    *mirror.Engine
	retention *retention.Retainer
}

type harnessOptions struct {
	engine    mirror.Config // AllowedOrigins defaults to originHost
	retention retention.Config
	origin    fakeorigin.Options
}

func newHarness(t *testing.T, opts harnessOptions) *harness {
	t.Helper()
	h := &harness{origin: enginetest.StartOrigin(t, opts.origin), store: enginetest.OpenStore(t, "", cache.Options{})}
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
	ret, err := retention.New(opts.retention, engine.Inventory(), h.store, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.retention = ret
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := engine.Shutdown(ctx); err != nil {
			t.Errorf("archive fetches still running: %v", err)
		}
		ret.Close()
		h.store.Close()
	})
	return h
}

// packages is the harness's engine behind its package policy.
func (h *harness) packages(t *testing.T) *served.Packages {
	t.Helper()
	p, err := served.New(served.Parts{Providers: h.engine, Modules: h.engine.Modules(), Zips: h.engine.Modules().Zips(), Stored: h.engine.Inventory()})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// newAPI returns the admin operations of the harness's engine and its
// retention.
func (h *harness) newAPI(t *testing.T, logger *slog.Logger, met Metrics, opts Options) *API {
	t.Helper()
	a, err := New(h.engine, h.packages(t), h.retention, logger, met, opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestMain(m *testing.M) {
	// Service discovery logs through the standard logger.
	log.SetOutput(io.Discard)
	leakcheck.Main(m)
}

// socket serves a over a unix socket in a new directory, as tfmirror
// serve does (Listen, NewServer), until the test ends, and returns the
// socket's data directory and a function that posts body to path
// through it and returns the status and the answer.
func socket(t *testing.T, a *API) (dataDir string, post func(path, body string) (int, []byte)) {
	t.Helper()
	dataDir, _, post = socketServer(t, a)
	return dataDir, post
}

// socketServer is socket, with the server it serves a with.
func socketServer(t *testing.T, a *API) (dataDir string, srv *Server, post func(path, body string) (int, []byte)) {
	t.Helper()
	dataDir = t.TempDir()
	ln, err := Listen(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	srv = a.NewServer(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", SocketPath(dataDir))
		},
	}}
	t.Cleanup(func() {
		client.CloseIdleConnections()
		srv.Close()
		<-done
	})
	return dataDir, srv, func(path, body string) (int, []byte) {
		t.Helper()
		resp, err := client.Post("http://tfmirror"+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, b
	}
}

// cacheWidget caches versions of acme/widget for linux_amd64 through a's
// Ensure and waits until they are committed; it returns the provider.
func (h *harness) cacheWidget(t *testing.T, a *API, versions ...string) addrs.Provider {
	t.Helper()
	h.origin.AddProvider("acme", "widget", versions, []string{"linux_amd64"})
	p, err := addrs.ParseProvider(originHost + "/acme/widget")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range versions {
		if _, err := a.Ensure(context.Background(), p, v, "linux_amd64"); err != nil {
			t.Fatalf("ensure %s: %v", v, err)
		}
	}
	mirror.WaitIdle(context.Background(), h.engine)
	return p
}
