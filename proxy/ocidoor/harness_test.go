package ocidoor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/leakcheck"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/mirror/served"
	"github.com/tfmirror/tfmirror/v2/oci"
	"github.com/tfmirror/tfmirror/v2/proxy"
)

const originHost = enginetest.OriginHost

// rig is a mirror (engine, OCI side, the proxy with this front door
// mounted) over the fake origin, served with TLS on loopback.
type rig struct {
	t      testing.TB
	origin *fakeorigin.Origin
	store  *cache.Store
	engine *mirror.Engine
	pkgs   *served.Packages // the engine behind the package policy, as the door takes it
	http   *httptest.Server
	server *proxy.Server
	names  oci.Names
	dir    string
}

type rigOptions struct {
	origin   fakeorigin.Options
	engine   mirror.Config
	auth     *proxy.Auth
	cacheDir string // "" = in memory
	// providers, if set, is what the package policy's layer decorates in
	// place of the engine (a stand-in over it).
	providers func(*mirror.Engine) served.Providers
	// modules, if set, is what the layer decorates in place of the
	// engine's modules (a stand-in over them).
	modules func(*modules.Modules) served.Modules
}

func newRig(t testing.TB, opts rigOptions) *rig {
	t.Helper()
	r := &rig{t: t, origin: enginetest.StartOrigin(t, opts.origin), dir: opts.cacheDir}
	r.start(opts)
	return r
}

// start (re)starts the mirror on the rig's origin and cache directory.
func (r *rig) start(opts rigOptions) {
	t := r.t
	t.Helper()
	r.store = enginetest.OpenStore(t, opts.cacheDir, cache.Options{})
	ecfg := opts.engine
	ecfg.Logger = enginetest.Logger(t)
	if ecfg.AllowedOrigins == nil {
		ecfg.AllowedOrigins = []string{originHost}
	}
	client := enginetest.OriginClient(t, r.origin)
	engine, err := mirror.New(ecfg, client, r.store)
	if err != nil {
		t.Fatal(err)
	}
	r.engine = engine
	side, err := engine.NewOCI()
	if err != nil {
		t.Fatal(err)
	}
	r.names, err = oci.NewNames("providers", "modules")
	if err != nil {
		t.Fatal(err)
	}
	var providers served.Providers = engine
	if opts.providers != nil {
		providers = opts.providers(engine)
	}
	var mods served.Modules = engine.Modules()
	if opts.modules != nil {
		mods = opts.modules(engine.Modules())
	}
	pkgs, err := served.New(served.Parts{Providers: providers, Modules: mods, Zips: engine.Modules().Zips(), OCI: side})
	if err != nil {
		t.Fatal(err)
	}
	r.pkgs = pkgs
	// The door names the mirror by the URL the server holds, as
	// tfmirror serve wires it.
	var srv *proxy.Server
	door, err := New(Config{Names: r.names, Auth: opts.auth, Logger: ecfg.Logger, Modules: pkgs,
		MirrorURL: func(req *http.Request) string { return srv.MirrorURL(req) }}, pkgs)
	if err != nil {
		t.Fatal(err)
	}
	srv, err = proxy.New(proxy.Config{Logger: ecfg.Logger, Auth: opts.auth, OCI: door}, pkgs)
	if err != nil {
		t.Fatal(err)
	}
	r.server = srv
	r.http = httptest.NewTLSServer(srv)
	t.Cleanup(r.stop)
}

func (r *rig) stop() {
	if r.http == nil {
		return
	}
	r.http.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.engine.Shutdown(ctx); err != nil {
		r.t.Errorf("work still running: %v", err)
	}
	r.store.Close()
	r.http = nil
}

// host is the mirror's host:port, as OCI references name registries.
func (r *rig) host() string { return strings.TrimPrefix(r.http.URL, "https://") }

// repo returns an oras-go repository of the mirror for provider NS/TYPE
// of the fake origin (named as the door names it), with credentials if
// cred is not empty.
func (r *rig) repo(ns, typ string, cred auth.Credential) *remote.Repository {
	r.t.Helper()
	p, err := addrs.NewProvider(originHost, ns, typ)
	if err != nil {
		r.t.Fatal(err)
	}
	repo, err := remote.NewRepository(r.host() + "/" + r.names.Provider(p))
	if err != nil {
		r.t.Fatal(err)
	}
	repo.Client = &auth.Client{
		Client:     r.http.Client(),
		Cache:      auth.NewCache(),
		Credential: auth.StaticCredential(r.host(), cred),
	}
	return repo
}

// do sends one request to the mirror.
func (r *rig) do(method, path string, header ...string) *http.Response {
	r.t.Helper()
	req, err := http.NewRequest(method, r.http.URL+path, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := r.http.Client().Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	return resp
}

func TestMain(m *testing.M) {
	// Service discovery logs through the standard logger.
	log.SetOutput(io.Discard)
	leakcheck.Main(m)
}

func sha256Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
