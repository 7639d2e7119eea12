package retention

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/leakcheck"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/imports"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/sharedstore"
)

// originHost is the provider host the tests use; its name resolves, for
// the engine under test only, to the fake origin on loopback.
const originHost = enginetest.OriginHost

const (
	ns  = "hashicorp"
	typ = "random"
)

// harness is an engine on a cache, in front of a fake origin, with the
// cache's retention.
type harness struct {
	t      *testing.T
	origin *fakeorigin.Origin
	store  *cache.Store
	engine *mirror.Engine
	ret    *Retainer
	closed bool
}

type harnessOptions struct {
	cfg      mirror.Config // the engine's
	ret      Config        // retention's
	shared   sharedBoth    // the engine's and retention's shared store; nil: none
	origin   fakeorigin.Options
	cacheDir string        // on-disk cache (to test restarts); "" = in memory
	store    cache.Options // further cache options (Dir and InMemory are set from cacheDir)
	// wrap, when set, is what retention is given of the engine's
	// inventory (a test's failures).
	wrap func(Engine) Engine
	// wrapStore, when set, is what retention is given of the cache (a
	// test's failures).
	wrapStore func(Store) Store
}

// sharedBoth is a shared store as the engine and retention use it.
type sharedBoth interface {
	mirror.SharedTier
	Shared
}

func newHarness(t *testing.T, opts harnessOptions) *harness {
	t.Helper()
	h := &harness{t: t, origin: enginetest.StartOrigin(t, opts.origin)}
	h.start(opts)
	return h
}

// start (re)creates the engine and its retention on the harness's origin.
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
	var shared Shared
	if opts.shared != nil {
		cfg.Shared, shared = opts.shared, opts.shared
	}
	engine, err := mirror.New(cfg, enginetest.OriginClient(t, h.origin), h.store)
	if err != nil {
		t.Fatal(err)
	}
	var inv Engine = engine.Inventory()
	if opts.wrap != nil {
		inv = opts.wrap(inv)
	}
	var store Store = h.store
	if opts.wrapStore != nil {
		store = opts.wrapStore(store)
	}
	ret, err := New(opts.ret, inv, store, shared)
	if err != nil {
		t.Fatal(err)
	}
	h.engine, h.ret = engine, ret
	h.closed = false
	t.Cleanup(h.stop)
}

// stop shuts the engine down, then retention (which writes the last
// uses), then closes the cache.
func (h *harness) stop() {
	if h.closed {
		return
	}
	h.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.engine.Shutdown(ctx); err != nil {
		h.t.Errorf("archive fetches still running: %v", err)
	}
	h.ret.Close()
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

// read opens the archive of version of the test provider for platform and
// reads it to the end.
func (h *harness) read(ctx context.Context, version, platform string) ([]byte, error) {
	h.t.Helper()
	return h.readOf(ctx, typ, version, platform)
}

// readOf reads a package of provider type typ of the test namespace.
func (h *harness) readOf(ctx context.Context, typ, version, platform string) ([]byte, error) {
	h.t.Helper()
	p := h.provider()
	p.Type = typ
	a, err := h.engine.OpenArchive(ctx, p, mustVersion(h.t, version), mustPlatform(h.t, platform))
	if err != nil {
		return nil, err
	}
	defer a.Close()
	return io.ReadAll(a)
}

// readAll reads every given version of the test provider for linux_amd64
// and checks the bytes.
func (h *harness) readAll(versions ...string) {
	h.t.Helper()
	h.readAllOf(typ, versions...)
}

// readAllOf is readAll of provider type typ of the test namespace.
func (h *harness) readAllOf(typ string, versions ...string) {
	h.t.Helper()
	for _, v := range versions {
		want := h.origin.Archive(ns, typ, v, "linux_amd64")
		if body, err := h.readOf(h.t.Context(), typ, v, "linux_amd64"); err != nil || !bytes.Equal(body, want) {
			h.t.Fatalf("%s %s: err %v, %d bytes", typ, v, err, len(body))
		}
		h.waitCommitted(h.origin.SHA256(ns, typ, v, "linux_amd64"))
	}
}

func (h *harness) isCached(v string) bool {
	_, err := h.store.StatBlob(h.origin.SHA256(ns, typ, v, "linux_amd64"))
	return err == nil
}

// waitIdle waits until no archive fetch is running.
func (h *harness) waitIdle() { h.t.Helper(); enginetest.WaitIdle(h.t, h.idle) }

// idle waits for the engine's fetches to end.
func (h *harness) idle(ctx context.Context) error { return mirror.WaitIdle(ctx, h.engine) }

// waitCommitted waits for fetches to end and checks sha is cached.
func (h *harness) waitCommitted(sha string) {
	h.t.Helper()
	enginetest.WaitCommitted(h.t, h.idle, h.store, sha)
}

// importFrom imports version of the test provider for platform into dst,
// as another mirror's export of src's cache gives it (signed by src's
// origin's key).
func importFrom(t *testing.T, src, dst *harness, version, platform string) {
	t.Helper()
	v := mustVersion(t, version)
	ev, err := src.engine.Evidence(t.Context(), src.provider(), v, []addrs.Platform{mustPlatform(t, platform)})
	if err != nil {
		t.Fatal(err)
	}
	in := enginetest.ImportedFrom(ev, func(pl string) []byte { return src.origin.Archive(ns, typ, version, pl) })
	in.Version = v
	if _, err := dst.engine.AirGap().Import(t.Context(), in); err != nil {
		t.Fatalf("signed import of %s %s: %v", version, platform, err)
	}
}

// pruneNamed prunes version of the test provider from h by name, after a
// dry run that must list the same, and returns what it removed.
func pruneNamed(t *testing.T, h *harness, version string) []Removal {
	t.Helper()
	p := h.provider()
	req := PruneRequest{Provider: &p, Versions: []string{version}}
	dry := req
	dry.DryRun = true
	planned, err := h.ret.Prune(t.Context(), dry)
	if err != nil {
		t.Fatal(err)
	}
	done, err := h.ret.Prune(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(done, planned) {
		t.Errorf("the dry run listed %+v, the prune removed %+v", planned, done)
	}
	return done
}

// bucketArchives are the archives the shared store s lists.
func bucketArchives(t *testing.T, s *sharedstore.Store) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	if err := s.ListArchives(t.Context(), func(sha string, _ int64, _ time.Time) error { got[sha] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

func removalNames(rs []Removal) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Version+" "+r.Rule)
	}
	return out
}

// packageKey is the key of a provider version's record in the cache.
func packageKey(p addrs.Provider, v string) string { return "package/" + p.String() + "/" + v }

// staticPins pins exact versions of the test provider.
type staticPins struct {
	mu      sync.Mutex
	pins    *Pins
	changed bool
}

func pinVersions(t *testing.T, addr string, vs ...string) *staticPins {
	t.Helper()
	var sels []PinSelection
	for _, v := range vs {
		sels = append(sels, PinSelection{Set: versions.Only(mustVersion(t, v)), Where: "test.lock.hcl:1"})
	}
	return &staticPins{pins: &Pins{Providers: map[string][]PinSelection{addr: sels}}, changed: true}
}

func (p *staticPins) Pins() (*Pins, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.changed {
		return nil, false, nil
	}
	p.changed = false
	return p.pins, true, nil
}

// retentionMetrics records what retention reports.
type retentionMetrics struct {
	mu        sync.Mutex
	removed   map[string][2]int64 // rule -> versions, bytes
	shared    map[string][2]int64 // of the shared store's bucket
	kept      int64
	unmet     bool
	keptCalls int
}

func (m *retentionMetrics) RetentionRemoved(rule string, versions int, bytes int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.removed == nil {
		m.removed = map[string][2]int64{}
	}
	r := m.removed[rule]
	m.removed[rule] = [2]int64{r[0] + int64(versions), r[1] + bytes}
}

func (m *retentionMetrics) RetentionSharedRemoved(rule string, versions int, bytes int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.shared == nil {
		m.shared = map[string][2]int64{}
	}
	r := m.shared[rule]
	m.shared[rule] = [2]int64{r[0] + int64(versions), r[1] + bytes}
}

func (m *retentionMetrics) RetentionKept(bytes int64, unmet bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.kept, m.unmet = bytes, unmet
	m.keptCalls++
}

func opener(b []byte) func(context.Context) (io.ReadCloser, int64, error) {
	return func(context.Context) (io.ReadCloser, int64, error) {
		return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
	}
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// unsignedImport is an in-house package of p's version for linux_amd64
// of about size bytes (distinct per seed), and its sha256.
func unsignedImport(t *testing.T, p addrs.Provider, version string, size int, seed uint64) (imports.Imported, string) {
	t.Helper()
	zipped := enginetest.ZipOfSize(t, p.Type, size, seed)
	return imports.Imported{Provider: p, Version: mustVersion(t, version), Unsigned: true, Packages: []imports.Package{{
		Platform: "linux_amd64", Filename: "terraform-provider-" + p.Type + "_" + version + "_linux_amd64.zip", Document: -1,
		Open: opener(zipped),
	}}}, sha256Hex(zipped)
}

// sharedTier is a sharedstore.Store as the engine and retention use it.
type sharedTier struct{ *sharedstore.Store }

func (t sharedTier) TryLease(ctx context.Context, sha string) (mirror.SharedLease, error) {
	l, err := t.Store.TryLease(ctx, sha)
	if l == nil {
		return nil, err
	}
	return l, err
}

const (
	bucket       = "tfm"
	sharedPrefix = "shared"
)

// newSharedStore opens the test bucket as replica name would. Its leases
// last the mirror's default 30 s: no test here waits for one to expire,
// and one of 3 s (2 s by the store's clock, which dates in whole seconds)
// could expire under a test that holds it while the machine is loaded.
func newSharedStore(t *testing.T, srv *s3test.Server, name string) *sharedstore.Store {
	t.Helper()
	cfg := sharedstore.Config{URL: srv.URL(bucket, sharedPrefix), Holder: name, LeaseTTL: 30 * time.Second,
		CallTimeout: 5 * time.Second, BreakerThreshold: 2, BreakerCooldown: 50 * time.Millisecond}
	keys, err := sharedstore.NewKeys(bytes.Repeat([]byte("r"), sharedstore.MinKeyBytes), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Keys = keys
	s, err := sharedstore.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMain(m *testing.M) {
	// Service discovery logs through the standard logger.
	log.SetOutput(io.Discard)
	leakcheck.Main(m)
}

var (
	testModule = addrs.Module{Hostname: originHost, Namespace: "acme", Name: "vpc", System: "aws"}
	tarballMod = addrs.Module{Hostname: originHost, Namespace: "acme", Name: "tarball", System: "aws"}
)

func readModule(t *testing.T, h *harness, version string) (*modules.Package, []byte, error) {
	t.Helper()
	pkg, err := h.engine.Modules().OpenModule(context.Background(), testModule, enginetest.MustModuleVersion(t, version))
	if err != nil {
		return nil, nil, err
	}
	defer pkg.Close()
	b, err := io.ReadAll(pkg.Content())
	return pkg, b, err
}

// bucketWait bounds a wait for a replica's background write to the
// bucket: done in milliseconds on an idle machine, such a write has taken
// more than 30 s on a loaded two-core CI machine (cmd/tfmirror's tests).
const bucketWait = 2 * time.Minute

// replicaWithTwoVersionsShared is a replica sharing a bucket on a
// versitygw of its own, with KeepVersions 1 and no pass of its own
// (Interval -1), that has read versions 1.0.0 and 2.0.0 of a provider of
// one platform and written both archives to the bucket.
func replicaWithTwoVersionsShared(t *testing.T) (*harness, *sharedstore.Store, *s3test.Server) {
	t.Helper()
	return replicaWithTwoVersionsSharedPins(t, nil)
}

// replicaWithTwoVersionsSharedPins is replicaWithTwoVersionsShared with
// pins (nil: none).
func replicaWithTwoVersionsSharedPins(t *testing.T, pins PinSource) (*harness, *sharedstore.Store, *s3test.Server) {
	t.Helper()
	return replicaWithTwoVersionsSharedConfig(t, Config{KeepVersions: 1, Interval: -1, Pins: pins})
}

// replicaWithTwoVersionsSharedConfig is replicaWithTwoVersionsShared with
// retention's cfg.
func replicaWithTwoVersionsSharedConfig(t *testing.T, cfg Config) (*harness, *sharedstore.Store, *s3test.Server) {
	t.Helper()
	srv := s3test.Start(t)
	srv.SetEnv(t)
	srv.CreateBucket(bucket)
	sa := newSharedStore(t, srv, "a")
	a := newHarness(t, harnessOptions{shared: sharedTier{sa}, ret: cfg})
	a.origin.AddProvider(ns, typ, []string{"1.0.0", "2.0.0"}, []string{"linux_amd64"})
	a.readAll("1.0.0", "2.0.0")
	a.waitIdle()
	deadline := time.Now().Add(bucketWait)
	for n := len(bucketArchives(t, sa)); n != 2; n = len(bucketArchives(t, sa)) {
		if time.Now().After(deadline) {
			t.Fatalf("the bucket holds %d archives, want 2", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return a, sa, srv
}
