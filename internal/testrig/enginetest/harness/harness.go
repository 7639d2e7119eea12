// Package harness is an engine (package mirror) on a cache, in front of a
// fake origin on loopback, for the tests of the engine's parts (mirror/modules,
// mirror/gate, mirror/inventory, ...), written as external test packages that
// drive the engine through its public API. It is not the rig of package
// mirror's own tests, which cannot import it (it imports mirror); those use
// the harness in mirror/harness_test.go, on package enginetest. Tests
// only: the shipped binary links none of it.
package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/cachecheck"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// OriginHost is the provider host the tests use; its name resolves, for
// the engine under test only, to the fake origin on loopback.
const OriginHost = enginetest.OriginHost

// The test provider's namespace and type.
const (
	NS   = "hashicorp"
	Type = "random"
)

// Platforms are the platforms the tests publish.
var Platforms = []string{"darwin_arm64", "linux_amd64", "windows_amd64"}

// The engine's types and constructor the tests of its parts configure
// and read it with: the parts sit in layers below the engine, and their
// tests reach it through this rig only (internal/layercheck).
type (
	// Config is mirror.Config.
	Config = mirror.Config
	// CachedVersion is mirror.CachedVersion.
	CachedVersion = mirror.CachedVersion
	// Store is mirror.Store, what Options.Wrap stands between the engine
	// and the cache.
	Store = mirror.Store
)

// NewEngine is mirror.New.
func NewEngine(cfg Config, origin mirror.Origin, store mirror.Store) (*mirror.Engine, error) {
	return mirror.New(cfg, origin, store)
}

// Harness is an engine on a cache, in front of a fake origin.
type Harness struct {
	T      *testing.T
	Origin *fakeorigin.Origin
	Store  *cache.Store
	Engine *mirror.Engine
	// Closed says the engine is shut down and the cache closed: Stop does
	// nothing. A test that shuts the engine down itself sets it.
	Closed bool
}

// Options configure a Harness.
type Options struct {
	Config   mirror.Config
	Origin   fakeorigin.Options
	CacheDir string        // on-disk cache (to test restarts); "" = in memory
	Store    cache.Options // further cache options (Dir and InMemory are set from CacheDir)
	// Wrap, if set, stands between the engine and the cache.
	Wrap func(mirror.Store) mirror.Store
	// WrapOrigin, if set, stands between the engine and the origin client.
	WrapOrigin func(mirror.Origin) mirror.Origin
	// OriginConfig, if set, changes the origin client's configuration
	// (its Credentials, say) before it is made.
	OriginConfig func(*discovery.Config)
}

// New starts a fake origin and an engine in front of it; both end with
// the test.
func New(t *testing.T, opts Options) *Harness {
	t.Helper()
	h := &Harness{T: t, Origin: enginetest.StartOrigin(t, opts.Origin)}
	h.Start(opts)
	return h
}

// Start (re)creates the engine on the harness's origin.
func (h *Harness) Start(opts Options) {
	t := h.T
	t.Helper()
	h.Store = enginetest.OpenStore(t, opts.CacheDir, opts.Store)
	cfg := opts.Config
	if cfg.Logger == nil {
		cfg.Logger = enginetest.Logger(t)
	}
	if cfg.AllowedOrigins == nil {
		cfg.AllowedOrigins = []string{OriginHost}
	}
	var store mirror.Store = h.Store
	if opts.Wrap != nil {
		store = opts.Wrap(h.Store)
	}
	var mods []func(*discovery.Config)
	if opts.OriginConfig != nil {
		mods = append(mods, opts.OriginConfig)
	}
	var origin mirror.Origin = enginetest.OriginClient(t, h.Origin, mods...)
	if opts.WrapOrigin != nil {
		origin = opts.WrapOrigin(origin)
	}
	engine, err := mirror.New(cfg, origin, store)
	if err != nil {
		t.Fatal(err)
	}
	h.Engine = engine
	h.Closed = false
	t.Cleanup(h.Stop)
}

// Stop shuts the engine down, then closes the cache.
func (h *Harness) Stop() {
	if h.Closed {
		return
	}
	h.Closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Engine.Shutdown(ctx); err != nil {
		h.T.Errorf("archive fetches still running: %v", err)
	}
	h.Store.Close()
}

// Provider is the test provider.
func (h *Harness) Provider() addrs.Provider {
	return addrs.Provider{Hostname: OriginHost, Namespace: NS, Type: Type}
}

// MustVersion parses s or fails the test.
func MustVersion(t *testing.T, s string) versions.Version {
	t.Helper()
	v, err := addrs.ParseSemver(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// MustPlatform parses s or fails the test.
func MustPlatform(t *testing.T, s string) addrs.Platform {
	t.Helper()
	pl, err := addrs.ParsePlatform(s)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// Archive is what a reader of one archive got.
type Archive struct {
	Opened bool // OpenArchive succeeded
	Body   []byte
	Source records.Source
	Err    error // opening or reading failed
}

// Read opens the archive of version of the test provider for platform and
// reads it to the end.
func (h *Harness) Read(ctx context.Context, version, platform string) Archive {
	h.T.Helper()
	a, err := h.Engine.OpenArchive(ctx, h.Provider(), MustVersion(h.T, version), MustPlatform(h.T, platform))
	if err != nil {
		return Archive{Err: err}
	}
	defer a.Close()
	body, err := io.ReadAll(a)
	return Archive{Opened: true, Body: body, Source: a.Source, Err: err}
}

// ReadAll reads every given version of the test provider for linux_amd64,
// checks the bytes, and waits for each archive to be cached.
func (h *Harness) ReadAll(versions ...string) {
	h.T.Helper()
	for _, v := range versions {
		want := h.Origin.Archive(NS, Type, v, "linux_amd64")
		if r := h.Read(h.T.Context(), v, "linux_amd64"); r.Err != nil || !bytes.Equal(r.Body, want) {
			h.T.Fatalf("%s: err %v, %d bytes", v, r.Err, len(r.Body))
		}
		h.WaitCommitted(h.Origin.SHA256(NS, Type, v, "linux_amd64"))
	}
}

// Packages returns the package metadata of version for platforms (nil: all).
func (h *Harness) Packages(version string, platforms ...string) (*mirror.Package, error) {
	h.T.Helper()
	var pls []addrs.Platform
	for _, pl := range platforms {
		pls = append(pls, MustPlatform(h.T, pl))
	}
	return h.Engine.Package(context.Background(), h.Provider(), MustVersion(h.T, version), pls)
}

// Listed returns the versions the engine lists for the test provider.
func (h *Harness) Listed() []string {
	h.T.Helper()
	list, _, err := h.Engine.Versions(context.Background(), h.Provider())
	if err != nil {
		h.T.Fatal(err)
	}
	return list.Names()
}

// WaitIdle waits until no archive fetch is running.
func (h *Harness) WaitIdle() { h.T.Helper(); enginetest.WaitIdle(h.T, h.wait) }

// WaitCommitted waits for fetches to end and checks sha is cached.
func (h *Harness) WaitCommitted(sha string) {
	h.T.Helper()
	enginetest.WaitCommitted(h.T, h.wait, h.Store, sha)
}

func (h *Harness) wait(ctx context.Context) error { return mirror.WaitIdle(ctx, h.Engine) }

// VerifyCached checks the cached package of version v of p for platform
// pl again, as the engine's check of the whole cache does
// (cachecheck.Checker.VerifyCache, which checks a provider package against
// its stored evidence, else against its sha256). Errors:
// records.ErrNotCached when the check found no such package;
// records.ErrNoEvidence when it was checked by its sha256 alone, having no
// evidence; an error with the check's problem when it failed; those that
// stopped the check.
func (h *Harness) VerifyCached(ctx context.Context, p addrs.Provider, v versions.Version, pl addrs.Platform) error {
	var found *cachecheck.Result
	err := h.Engine.CacheChecker().VerifyCache(ctx, func(r cachecheck.Result) {
		if r.Kind == "provider" && !r.Withheld && r.Address == p.String() && r.Platform == pl.String() &&
			r.Version == v.String() {
			found = &r
		}
	})
	switch {
	case err != nil:
		return err
	case found == nil:
		return fmt.Errorf("%w: %s %s %s", records.ErrNotCached, p, v, pl)
	case found.Problem != "":
		return fmt.Errorf("%s %s %s (%s): %s", p, v, pl, found.Reason, found.Problem)
	case found.By != cachecheck.CheckedEvidence:
		return fmt.Errorf("%w: %s %s %s, checked by %s", records.ErrNoEvidence, p, v, pl, found.By)
	}
	return nil
}
