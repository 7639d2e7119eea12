package mirror

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
	"github.com/tfmirror/tfmirror/v2/mirror/fetch"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/sharedtier"
	"github.com/tfmirror/tfmirror/v2/sharedstore"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// sharedTier is a sharedstore.Store as a SharedTier.
type sharedTier struct{ *sharedstore.Store }

func (t sharedTier) TryLease(ctx context.Context, sha string) (SharedLease, error) {
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

// sharedCounts counts a shared store's calls by operation/outcome.
type sharedCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *sharedCounts) SharedStoreRequest(op, outcome string, _ time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[op+"/"+outcome]++
}
func (c *sharedCounts) SharedStoreDown(bool)        {}
func (c *sharedCounts) SharedStoreConditional(bool) {}
func (c *sharedCounts) SharedStoreRejected(kind string) {
	c.SharedStoreRequest("rejected", kind, 0)
}

// sharedKeys are the test replicas' shared store keys.
func sharedKeys(t *testing.T) *sharedstore.Keys {
	t.Helper()
	k, err := sharedstore.NewKeys(bytes.Repeat([]byte("r"), sharedstore.MinKeyBytes), nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
func (c *sharedCounts) get(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[k]
}

// originFetches counts the origin archive fetches the engine reports.
type originFetches struct {
	noMetrics
	started atomic.Int64
}

func (m *originFetches) ArchiveFetchStarted() func() { m.started.Add(1); return func() {} }

// replica is an engine with its own cache on the shared tier.
type replica struct {
	*harness
	shared  *sharedstore.Store
	counts  *sharedCounts
	fetches *originFetches
}

// newSharedStore opens the test bucket as replica name would. Its leases
// last the mirror's default 30 s, renewed every 10 s: a live holder's
// lease must not expire under the other replicas (a lease of 3 s, 2 s
// by the store's clock, which dates in whole seconds, did when a loaded
// machine held up a renewal); a test of an expired lease takes one of
// deadSharedStore.
func newSharedStore(t *testing.T, srv *s3test.Server, name string, counts sharedstore.Observer) *sharedstore.Store {
	t.Helper()
	return openSharedStore(t, srv, name, counts, 30*time.Second)
}

// deadSharedStore opens the test bucket as a replica that takes a lease
// and dies would: its leases, never renewed, expire after 3 s.
func deadSharedStore(t *testing.T, srv *s3test.Server, name string) *sharedstore.Store {
	t.Helper()
	return openSharedStore(t, srv, name, nil, 3*time.Second)
}

func openSharedStore(t *testing.T, srv *s3test.Server, name string, counts sharedstore.Observer, leaseTTL time.Duration) *sharedstore.Store {
	t.Helper()
	cfg := sharedstore.Config{URL: srv.URL(bucket, sharedPrefix), Holder: name, LeaseTTL: leaseTTL,
		CallTimeout: 5 * time.Second, BreakerThreshold: 2, BreakerCooldown: 50 * time.Millisecond, Keys: sharedKeys(t)}
	if counts != nil {
		cfg.Observer = counts
	}
	s, err := sharedstore.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newReplicas starts n engines, each with its own cache, on one fake
// origin and one bucket of a versitygw started for the test.
// gate, when not nil, holds every origin archive download until it is
// closed.
func newReplicas(t *testing.T, n int, gate <-chan struct{}) (*s3test.Server, []*replica) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	srv.CreateBucket(bucket)
	var rs []*replica
	var first *harness
	for i := range n {
		r := &replica{counts: &sharedCounts{}, fetches: &originFetches{}}
		r.shared = newSharedStore(t, srv, string(rune('a'+i)), r.counts)
		opts := harnessOptions{cfg: Config{Shared: sharedTier{r.shared}, Metrics: r.fetches}}
		if gate != nil {
			opts.wrapOrigin = func(o Origin) Origin { return gatedOrigin{o, gate} }
		}
		if first == nil {
			r.harness = newHarness(t, opts)
			first = r.harness
		} else {
			r.harness = &harness{t: t, origin: first.origin}
			r.start(opts)
		}
		rs = append(rs, r)
	}
	first.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	return srv, rs
}

// gatedOrigin holds archive downloads until gate is closed.
type gatedOrigin struct {
	Origin
	gate <-chan struct{}
}

func (g gatedOrigin) OpenArchive(ctx context.Context, p addrs.Provider, rawURL string) (io.ReadCloser, int64, error) {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	return g.Origin.OpenArchive(ctx, p, rawURL)
}

// Thirty clients asking three replicas at once for one archive none of
// them has: one origin download, every client gets the archive, and the
// bucket ends up with the archive and the records, and no lease. The
// origin's answer is held until the two replicas that did not get the
// lease wait for the one that did.
func TestSharedOneOriginDownload(t *testing.T) {
	gate := make(chan struct{})
	srv, rs := newReplicas(t, 3, gate)
	origin := rs[0].origin
	want := origin.Archive(ns, typ, "1.0.0", "linux_amd64")

	var waiting sync.WaitGroup
	waiting.Add(2)
	for _, r := range rs {
		var once sync.Once
		r.engine.archives.SetHooks(fetch.Hooks{Wait: func() { once.Do(waiting.Done) }})
	}
	var wg sync.WaitGroup
	got := make([]archive, 30)
	for i := range got {
		r := rs[i%len(rs)]
		wg.Go(func() { got[i] = r.read(context.Background(), "1.0.0", "linux_amd64") })
	}
	waited := make(chan struct{})
	go func() { waiting.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(2 * time.Minute):
		t.Error("two replicas did not wait for the lease holder's download")
	}
	close(gate)
	wg.Wait()
	sources := map[records.Source]int{}
	for i, a := range got {
		if a.err != nil || !bytes.Equal(a.body, want) {
			t.Errorf("client %d: %d bytes, %v", i, len(a.body), a.err)
		}
		sources[a.source]++
	}
	if sources[records.Miss] != 1 || sources[records.Shared] != 2 {
		t.Errorf("sources %v, want one miss (the origin download) and two shared (one per other replica)", sources)
	}
	for _, r := range rs {
		r.waitCommitted(origin.SHA256(ns, typ, "1.0.0", "linux_amd64"))
	}
	if n := origin.ArchiveHits(ns, typ, "1.0.0", "linux_amd64"); n != 1 {
		t.Errorf("%d origin downloads of the archive, want 1", n)
	}
	var fromShared, fetches int
	for _, r := range rs {
		fromShared += r.counts.get("get_archive/ok")
		fetches += int(r.fetches.started.Load())
	}
	if fetches != 1 {
		t.Errorf("the replicas report %d origin archive fetches, want 1", fetches)
	}
	if fromShared != 2 {
		t.Errorf("%d replicas took the archive from the shared store, want 2", fromShared)
	}
	keys := srv.Keys(bucket, sharedPrefix+"/")
	wantKeys := []string{
		sharedPrefix + "/archive-auth/" + origin.SHA256(ns, typ, "1.0.0", "linux_amd64"),
		sharedPrefix + "/archives/" + origin.SHA256(ns, typ, "1.0.0", "linux_amd64"),
		sharedPrefix + "/meta/package/" + originHost + "/" + ns + "/" + typ + "/1.0.0",
		sharedPrefix + "/meta/versions/" + originHost + "/" + ns + "/" + typ,
	}
	if !slices.Equal(keys, wantKeys) {
		t.Errorf("bucket holds\n%s\nwant\n%s", strings.Join(keys, "\n"), strings.Join(wantKeys, "\n"))
	}
}

// A sealed replica with an empty cache serves what another replica
// verified, from the shared tier alone.
func TestSharedOffline(t *testing.T) {
	srv, rs := newReplicas(t, 1, nil)
	origin := rs[0].origin
	want := origin.Archive(ns, typ, "1.0.0", "darwin_arm64")
	if a := rs[0].read(context.Background(), "1.0.0", "darwin_arm64"); a.err != nil {
		t.Fatal(a.err)
	}
	rs[0].waitIdle()
	hits := origin.TotalHits()

	sealed := &harness{t: t, origin: origin}
	sealed.start(harnessOptions{cfg: Config{Offline: true, Shared: sharedTier{newSharedStore(t, srv, "sealed", nil)}}})
	list, _, err := sealed.engine.Versions(context.Background(), sealed.provider())
	if err != nil || len(list.Versions) != 1 {
		t.Fatalf("versions: %v", err)
	}
	pkg, err := sealed.packages("1.0.0", "darwin_arm64")
	if err != nil || len(pkg.Archives) != 1 {
		t.Fatalf("package: %v", err)
	}
	a := sealed.read(context.Background(), "1.0.0", "darwin_arm64")
	if a.err != nil || !bytes.Equal(a.body, want) {
		t.Fatalf("archive: %d bytes, %v", len(a.body), a.err)
	}
	sealed.waitCommitted(origin.SHA256(ns, typ, "1.0.0", "darwin_arm64"))
	// Not in the shared tier: offline, that is not cached.
	if b := sealed.read(context.Background(), "1.0.0", "linux_amd64"); b.err == nil {
		t.Error("a sealed replica served an archive that no replica has")
	}
	if n := origin.TotalHits(); n != hits {
		t.Errorf("the sealed replica made %d origin requests", n-hits)
	}
}

// With the store down, replicas serve from their caches and the origin and
// count the failures; once it is back, they share again.
func TestSharedStoreDown(t *testing.T) {
	srv, rs := newReplicas(t, 2, nil)
	origin := rs[0].origin
	srv.Stop()
	for _, r := range rs {
		a := r.read(context.Background(), "1.0.0", "linux_amd64")
		if a.err != nil || !bytes.Equal(a.body, origin.Archive(ns, typ, "1.0.0", "linux_amd64")) {
			t.Fatalf("store down: %d bytes, %v", len(a.body), a.err)
		}
		r.waitIdle()
		if r.counts.get("get_meta/error")+r.counts.get("get_archive/error") == 0 {
			t.Error("no failure of the store counted")
		}
	}
	if n := origin.ArchiveHits(ns, typ, "1.0.0", "linux_amd64"); n != 2 {
		t.Errorf("%d origin downloads with the store down, want one per replica", n)
	}
	// Cached locally: served without the store.
	if a := rs[0].read(context.Background(), "1.0.0", "linux_amd64"); a.err != nil || a.source != records.Hit {
		t.Fatalf("cached archive with the store down: %v, %v", a.source, a.err)
	}

	srv.Restart()
	// The breakers' cooldown (50ms) passes while the store restarts.
	if a := rs[0].read(context.Background(), "1.0.0", "windows_amd64"); a.err != nil {
		t.Fatal(a.err)
	}
	rs[0].waitIdle()
	if a := rs[1].read(context.Background(), "1.0.0", "windows_amd64"); a.err != nil {
		t.Fatal(a.err)
	}
	rs[1].waitIdle()
	if n := origin.ArchiveHits(ns, typ, "1.0.0", "windows_amd64"); n != 1 {
		t.Errorf("%d origin downloads with the store back, want 1", n)
	}
	if rs[1].counts.get("get_archive/ok") != 1 {
		t.Error("second replica did not take the archive from the store")
	}
}

// A lease whose holder died (never renewed) is taken over once it
// expires: the waiting replica downloads the archive itself.
func TestSharedLeaseTakeover(t *testing.T) {
	srv, rs := newReplicas(t, 1, nil)
	origin := rs[0].origin
	sha := origin.SHA256(ns, typ, "1.0.0", "linux_amd64")
	dead := deadSharedStore(t, srv, "dead")
	// Taken before the lease is, so that the time its answer took to
	// come back never counts as time the lease ran.
	start := time.Now()
	// The lease a replica takes on downloading the archive for its
	// provider.
	if l, err := dead.TryLease(context.Background(), sharedtier.LeaseID(sha, rs[0].provider().String())); err != nil || l == nil {
		t.Fatalf("lease: %v", err)
	}
	waited := make(chan struct{})
	var once sync.Once
	rs[0].engine.archives.SetHooks(fetch.Hooks{Wait: func() { once.Do(func() { close(waited) }) }})
	a := rs[0].read(context.Background(), "1.0.0", "linux_amd64")
	if a.err != nil || !bytes.Equal(a.body, origin.Archive(ns, typ, "1.0.0", "linux_amd64")) {
		t.Fatalf("%d bytes, %v", len(a.body), a.err)
	}
	select {
	case <-waited:
	default:
		t.Error("the replica did not wait for the lease holder")
	}
	if d := time.Since(start); d < 2*time.Second {
		t.Errorf("took the lease over after %v, before it expired", d)
	}
	rs[0].waitCommitted(sha)
	if n := origin.ArchiveHits(ns, typ, "1.0.0", "linux_amd64"); n != 1 {
		t.Errorf("%d origin downloads", n)
	}
	if keys := srv.Keys(bucket, sharedPrefix+"/leases/"); len(keys) != 0 {
		t.Errorf("leases left: %q", keys)
	}
}

// A copy in the shared tier that is not the archive it is stored as, under
// the header a replica wrote for the archive, is never served whole: the
// request streaming it fails, and from then on the replica fetches the
// archive from the origin, and puts it back in place of the bad copy.
func TestSharedCorruptCopy(t *testing.T) {
	srv, rs := newReplicas(t, 1, nil)
	origin := rs[0].origin
	sha := origin.SHA256(ns, typ, "1.0.0", "linux_amd64")
	want := origin.Archive(ns, typ, "1.0.0", "linux_amd64")
	if err := rs[0].shared.PutArchive(context.Background(), sha, bytes.NewReader(want), int64(len(want))); err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(want)
	bad[len(bad)/2] ^= 1
	if _, err := srv.Client().PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(sharedPrefix + "/archives/" + sha), Body: bytes.NewReader(bad)}); err != nil {
		t.Fatal(err)
	}
	if a := rs[0].read(context.Background(), "1.0.0", "linux_amd64"); !errors.Is(a.err, verify.ErrIntegrity) {
		t.Fatalf("corrupt copy: %d bytes, %v; want an integrity error", len(a.body), a.err)
	}
	rs[0].waitIdle()
	if n := rs[0].counts.get("rejected/archive"); n != 1 {
		t.Errorf("%d archive rejections counted, want 1", n)
	}
	a := rs[0].read(context.Background(), "1.0.0", "linux_amd64")
	if a.err != nil || !bytes.Equal(a.body, want) {
		t.Fatalf("after the corrupt copy: %d bytes, %v", len(a.body), a.err)
	}
	rs[0].waitCommitted(sha)
	rs[0].waitIdle()
	if n := origin.ArchiveHits(ns, typ, "1.0.0", "linux_amd64"); n != 1 {
		t.Errorf("%d origin downloads, want 1", n)
	}
	if got := bucketObject(t, srv, "archives/"+sha); !bytes.Equal(got, want) {
		t.Errorf("the bad copy was not replaced: %d bytes", len(got))
	}
}

// An archive without the header a replica writes (stored by an earlier
// release, or by anyone without the replicas' key) is never read: the
// replica fetches it from the origin at once, counts the rejection, and
// writes it back with its header.
func TestSharedArchiveWithoutHeader(t *testing.T) {
	srv, rs := newReplicas(t, 1, nil)
	origin := rs[0].origin
	sha := origin.SHA256(ns, typ, "1.0.0", "linux_amd64")
	want := origin.Archive(ns, typ, "1.0.0", "linux_amd64")
	bad := bytes.Clone(want)
	bad[len(bad)/2] ^= 1
	if _, err := srv.Client().PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(sharedPrefix + "/archives/" + sha), Body: bytes.NewReader(bad)}); err != nil {
		t.Fatal(err)
	}
	if a := rs[0].read(context.Background(), "1.0.0", "linux_amd64"); a.err != nil || !bytes.Equal(a.body, want) {
		t.Fatalf("%d bytes, %v", len(a.body), a.err)
	}
	rs[0].waitCommitted(sha)
	rs[0].waitIdle()
	if n := origin.ArchiveHits(ns, typ, "1.0.0", "linux_amd64"); n != 1 {
		t.Errorf("%d origin downloads, want 1", n)
	}
	// Counted at each read (here: before and after taking the lease).
	if n := rs[0].counts.get("rejected/archive"); n < 1 {
		t.Errorf("%d archive rejections counted, want at least 1", n)
	}
	if got := bucketObject(t, srv, "archives/"+sha); !bytes.Equal(got, want) {
		t.Errorf("the bucket's copy was not replaced: %d bytes", len(got))
	}
	if h := bucketObject(t, srv, "archive-auth/"+sha); !bytes.Contains(h, []byte(sha)) {
		t.Errorf("no header written back: %s", h)
	}
}

// bucketObject is the object under name (below the shared prefix).
func bucketObject(t *testing.T, srv *s3test.Server, name string) []byte {
	t.Helper()
	o, err := srv.Client().GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(sharedPrefix + "/" + name)})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Body.Close()
	b, err := io.ReadAll(o.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A store that accepts connections and never answers costs each call its
// timeout until the breaker opens; then it is not called, and the replica
// serves from the origin throughout.
func TestSharedStoreHangs(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	held := make(chan net.Conn, 64)
	t.Cleanup(func() {
		l.Close()
		conns.Wait()
		close(held)
		for c := range held {
			c.Close()
		}
	})
	conns.Go(func() {
		for range 64 {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held <- c // never answered
		}
	})
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	counts := &sharedCounts{}
	store, err := sharedstore.Open(context.Background(), sharedstore.Config{
		URL:         "s3://" + bucket + "/p?endpoint=http://" + l.Addr().String() + "&region=us-east-1&path_style=true",
		CallTimeout: 100 * time.Millisecond, BreakerThreshold: 2, BreakerCooldown: time.Hour, Observer: counts, Keys: sharedKeys(t)})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{cfg: Config{Shared: sharedTier{store}}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	for _, pl := range platforms {
		a := h.read(context.Background(), "1.0.0", pl)
		if a.err != nil || !bytes.Equal(a.body, h.origin.Archive(ns, typ, "1.0.0", pl)) {
			t.Fatalf("%s: %d bytes, %v", pl, len(a.body), a.err)
		}
		h.waitIdle()
	}
	var failed, skipped int
	counts.mu.Lock()
	defer counts.mu.Unlock()
	for k, n := range counts.n {
		switch {
		case strings.HasSuffix(k, "/error"):
			failed += n
		case strings.HasSuffix(k, "/unavailable"):
			skipped += n
		}
	}
	if failed != 2 || skipped == 0 || store.Status() == nil {
		t.Errorf("%d calls timed out, %d skipped (%v); want 2, then the breaker open", failed, skipped, counts.n)
	}
}

// blockingTier is an empty shared tier whose PutMeta waits for gate.
type blockingTier struct {
	gate chan struct{}
	puts atomic.Int64
}

type nopLease struct{}

func (nopLease) Keep(ctx context.Context) error { <-ctx.Done(); return nil }
func (nopLease) Release(context.Context) error  { return nil }
func (*blockingTier) OpenArchive(context.Context, string) (io.ReadCloser, int64, error) {
	return nil, 0, nil
}
func (*blockingTier) PutArchive(context.Context, string, io.ReadSeeker, int64) error { return nil }
func (*blockingTier) TryLease(context.Context, string) (SharedLease, error)          { return nopLease{}, nil }
func (*blockingTier) GetMeta(context.Context, string) (json.RawMessage, time.Time, error) {
	return nil, time.Time{}, nil
}
func (b *blockingTier) PutMeta(ctx context.Context, _ string, _ any) error {
	select {
	case <-b.gate:
		b.puts.Add(1)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Records go to the shared tier in the background: a slow tier does not
// hold up the callers, and the engine waits for the writes when asked to.
func TestSharedRecordsWrittenInBackground(t *testing.T) {
	tier := &blockingTier{gate: make(chan struct{})}
	h := newHarness(t, harnessOptions{cfg: Config{Shared: tier}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	answered := make(chan error, 1)
	go func() {
		_, err := h.packages("1.0.0", "linux_amd64")
		answered <- err
	}()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("with the tier's writes held: %v", err)
		}
	case <-time.After(2 * time.Minute):
		close(tier.gate)
		t.Fatal("the caller waited for the shared tier's writes")
	}
	if n := tier.puts.Load(); n != 0 {
		t.Fatalf("%d writes done while held", n)
	}
	close(tier.gate)
	h.waitIdle()
	if n := tier.puts.Load(); n != 2 {
		t.Errorf("%d records written, want 2 (version list, package record)", n)
	}
}

// What a replica takes from the shared tier on a local miss is, like a
// write to its cache, something it now answers from: the call that took
// it has moved the engine's generation, so its answer is not reused, and
// the next answers, from the replica's memo and cache, are, until the
// version list's age in the shared tier reaches the TTL.
func TestSharedStamps(t *testing.T) {
	srv, rs := newReplicas(t, 1, nil)
	if a := rs[0].read(context.Background(), "1.0.0", "linux_amd64"); a.err != nil {
		t.Fatal(a.err)
	}
	rs[0].waitIdle()

	clock := enginetest.NewFakeClock()
	b := &harness{t: t, origin: rs[0].origin}
	b.start(harnessOptions{cfg: Config{VersionsTTL: 10 * time.Minute, Now: clock.Now,
		Shared: sharedTier{newSharedStore(t, srv, "b", nil)}}})
	hits := rs[0].origin.TotalHits()

	first := b.listState()
	if first.Fetched || first.Stale {
		t.Fatalf("version list: fetched %v, stale %v; want it from the shared tier", first.Fetched, first.Stale)
	}
	if b.engine.Reuse(first.Stamp) {
		t.Error("the answer that took the version list from the shared tier is reusable")
	}
	list := b.listState()
	if !b.engine.Reuse(list.Stamp) {
		t.Error("a version list taken from the shared tier before is not reusable")
	}

	pkg, err := b.packages("1.0.0", "linux_amd64")
	if err != nil {
		t.Fatal(err)
	}
	if b.engine.Reuse(pkg.Stamp) {
		t.Error("the answer that copied the package record from the shared tier is reusable")
	}
	if b.engine.Reuse(list.Stamp) {
		t.Error("a version list answer is reusable after a package record was copied into the cache")
	}
	if pkg, err = b.packages("1.0.0", "linux_amd64"); err != nil {
		t.Fatal(err)
	}
	if !b.engine.Reuse(pkg.Stamp) {
		t.Error("a package record copied from the shared tier before is not reusable")
	}
	clock.Set(list.StoredAt.Add(10 * time.Minute))
	if b.engine.Reuse(pkg.Stamp) {
		t.Error("a package answer is reusable once the version list's age in the shared tier reached the TTL")
	}
	if n := rs[0].origin.TotalHits(); n != hits {
		t.Errorf("%d origin requests, want none", n-hits)
	}
}

// A package record in the shared tier whose evidence no longer verifies
// is not copied: the replica fetches and verifies the version from the
// origin, as when its own cached record fails, and its record replaces
// the shared tier's. Copied, the record would fail every records.Evidence call,
// copied again on every local miss.
func TestSharedRecordFailingEvidence(t *testing.T) {
	srv, rs := newReplicas(t, 1, nil)
	ctx := context.Background()
	if _, err := rs[0].packages("1.0.0", "linux_amd64"); err != nil {
		t.Fatal(err)
	}
	rs[0].waitIdle()
	key := records.PackageKey(rs[0].provider(), mustVersion(t, "1.0.0"))
	raw, _, err := rs[0].shared.GetMeta(ctx, key)
	if err != nil || raw == nil {
		t.Fatalf("the shared tier has no package record: %v", err)
	}
	var rec records.PackageRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	doc := &rec.Documents[rec.Archives["linux_amd64"].Evidence.Document]
	doc.Signature = bytes.Clone(doc.Signature)
	doc.Signature[len(doc.Signature)-8] ^= 0x01
	if err := rs[0].shared.PutMeta(ctx, key, &rec); err != nil {
		t.Fatal(err)
	}

	b := &harness{t: t, origin: rs[0].origin}
	b.start(harnessOptions{cfg: Config{Shared: sharedTier{newSharedStore(t, srv, "b", nil)}}})
	linux := []addrs.Platform{mustPlatform(t, "linux_amd64")}
	for i := range 2 {
		if _, err := b.engine.Evidence(ctx, b.provider(), mustVersion(t, "1.0.0"), linux); err != nil {
			t.Fatalf("Evidence, call %d: %v", i+1, err)
		}
	}
	b.waitIdle()
	if raw, _, err = rs[0].shared.GetMeta(ctx, key); err != nil {
		t.Fatal(err)
	}
	var replaced records.PackageRecord
	if err := json.Unmarshal(raw, &replaced); err != nil {
		t.Fatal(err)
	}
	if err := replaced.VerifyEvidence(typ, mustVersion(t, "1.0.0")); err != nil {
		t.Errorf("the shared tier's record still fails verification: %v", err)
	}
}

// breakingTier is the bucket, but every archive stream from it breaks off
// after `after` bytes, as a store going away mid-download does.
type breakingTier struct {
	sharedTier
	after int64
}

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

func (b breakingTier) OpenArchive(ctx context.Context, sha string) (io.ReadCloser, int64, error) {
	body, size, err := b.sharedTier.OpenArchive(ctx, sha)
	if err != nil || body == nil {
		return body, size, err
	}
	broken := io.MultiReader(io.LimitReader(body, b.after), failingReader{errors.New("read: connection reset by peer")})
	return struct {
		io.Reader
		io.Closer
	}{broken, body}, size, nil
}

// sharedArchive starts one replica on a new bucket and has it read the
// archive of 1.0.0 for linux_amd64, committed and put in the bucket: the
// bucket's server, the replica, and the archive's sha256 and bytes.
func sharedArchive(t *testing.T) (*s3test.Server, *replica, string, []byte) {
	t.Helper()
	srv, rs := newReplicas(t, 1, nil)
	a := rs[0]
	sha := a.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")
	want := a.origin.Archive(ns, typ, "1.0.0", "linux_amd64")
	if got := a.read(context.Background(), "1.0.0", "linux_amd64"); got.err != nil || !bytes.Equal(got.body, want) {
		t.Fatalf("first replica: %d bytes, %v", len(got.body), got.err)
	}
	a.waitIdle() // committed and put in the bucket
	return srv, a, sha, want
}

// A stream from the shared tier that breaks off midway does not fail the
// download: the origin gives the rest, and the readers get the whole,
// verified archive.
func TestSharedStreamBrokenOffMidway(t *testing.T) {
	srv, a, sha, want := sharedArchive(t)
	origin := a.origin

	b := &replica{counts: &sharedCounts{}, fetches: &originFetches{}}
	b.shared = newSharedStore(t, srv, "b", b.counts)
	b.harness = &harness{t: t, origin: origin}
	b.start(harnessOptions{cfg: Config{Shared: breakingTier{sharedTier{b.shared}, int64(len(want) / 2)}, Metrics: b.fetches}})
	got := b.read(context.Background(), "1.0.0", "linux_amd64")
	if got.err != nil || !bytes.Equal(got.body, want) {
		t.Fatalf("replica whose bucket stream broke off: %d of %d bytes, %v", len(got.body), len(want), got.err)
	}
	b.waitCommitted(sha)
	if n := origin.ArchiveHits(ns, typ, "1.0.0", "linux_amd64"); n != 2 {
		t.Errorf("%d origin downloads, want 2 (the first replica's, and the rest of the broken stream)", n)
	}
	if n := b.fetches.started.Load(); n != 1 {
		t.Errorf("second replica counted %d origin fetches, want 1", n)
	}
}

// A stream from the shared tier that goes silent midway (the store, or
// the network to it, no longer answering) does not hold the download for
// its hour: once no byte came for the store's call timeout, the origin
// gives the rest, and the readers get the whole, verified archive.
func TestSharedStreamGoneSilentMidway(t *testing.T) {
	srv, a, sha, want := sharedArchive(t)
	origin := a.origin

	silent, err := sharedstore.Open(context.Background(), sharedstore.Config{URL: srv.StallingURL(t, bucket, sharedPrefix),
		StoreID: sharedstore.DefaultStoreID(a.shared.Location()), Holder: "b", LeaseTTL: 30 * time.Second,
		CallTimeout: 300 * time.Millisecond, BreakerThreshold: 2, BreakerCooldown: time.Minute, Keys: sharedKeys(t)})
	if err != nil {
		t.Fatal(err)
	}
	b := &replica{counts: &sharedCounts{}, fetches: &originFetches{}, shared: silent}
	b.harness = &harness{t: t, origin: origin}
	b.start(harnessOptions{cfg: Config{Shared: sharedTier{silent}, Metrics: b.fetches}})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	got := b.read(ctx, "1.0.0", "linux_amd64")
	if got.err != nil || !bytes.Equal(got.body, want) {
		t.Fatalf("replica whose bucket stream went silent: %d of %d bytes in 15s, %v", len(got.body), len(want), got.err)
	}
	b.waitCommitted(sha)
	if n := origin.ArchiveHits(ns, typ, "1.0.0", "linux_amd64"); n != 2 {
		t.Errorf("%d origin downloads, want 2 (the first replica's, and the rest of the silent stream)", n)
	}
}

// enteredOrigin reports every archive download that reaches it, then
// holds it until gate is closed.
type enteredOrigin struct {
	Origin
	gate    <-chan struct{}
	entered chan<- struct{}
}

func (o enteredOrigin) OpenArchive(ctx context.Context, p addrs.Provider, rawURL string) (io.ReadCloser, int64, error) {
	o.entered <- struct{}{}
	select {
	case <-o.gate:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	return o.Origin.OpenArchive(ctx, p, rawURL)
}

// Two replicas whose clocks are five minutes apart, twenty clients on
// both: the archive is downloaded from the origin once. The lease is taken
// by the replica whose clock is behind, so that the other would find it
// expired by its own clock; it is judged by the store's.
func TestSharedLeaseClocksApart(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	srv.CreateBucket(bucket)
	gate := make(chan struct{})
	entered := make(chan struct{}, 8)
	skews := []time.Duration{0, 5 * time.Minute}
	var rs []*harness
	for i, skew := range skews {
		now := func() time.Time { return time.Now().Add(skew) }
		store, err := sharedstore.Open(context.Background(), sharedstore.Config{URL: srv.URL(bucket, sharedPrefix),
			// The lease outlasts a renewal held up by a loaded machine:
			// the replica ahead must find it live by the store's clock
			// (its own says it expired five minutes ago either way).
			Holder: string(rune('a' + i)), LeaseTTL: 30 * time.Second, CallTimeout: 5 * time.Second, Now: now, Keys: sharedKeys(t)})
		if err != nil {
			t.Fatal(err)
		}
		opts := harnessOptions{cfg: Config{Shared: sharedTier{store}, Now: now},
			wrapOrigin: func(o Origin) Origin { return enteredOrigin{o, gate, entered} }}
		if i == 0 {
			rs = append(rs, newHarness(t, opts))
		} else {
			h := &harness{t: t, origin: rs[0].origin}
			h.start(opts)
			rs = append(rs, h)
		}
	}
	origin := rs[0].origin
	origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	want := origin.Archive(ns, typ, "1.0.0", "linux_amd64")
	waited := make(chan struct{})
	var once sync.Once
	rs[1].engine.archives.SetHooks(fetch.Hooks{Wait: func() { once.Do(func() { close(waited) }) }})

	var wg sync.WaitGroup
	got := make([]archive, 20)
	clients := func(r *harness, from int) {
		for i := from; i < from+10; i++ {
			wg.Go(func() { got[i] = r.read(context.Background(), "1.0.0", "linux_amd64") })
		}
	}
	clients(rs[0], 0) // the replica behind takes the lease
	select {
	case <-entered:
	case <-time.After(2 * time.Minute):
		close(gate)
		t.Fatal("no origin download")
	}
	clients(rs[1], 10)
	select {
	case <-waited:
	case <-entered:
		t.Error("the replica five minutes ahead took over a live lease")
	case <-time.After(2 * time.Minute):
		t.Error("the replica five minutes ahead did not wait for the lease holder")
	}
	close(gate)
	wg.Wait()
	for i, a := range got {
		if a.err != nil || !bytes.Equal(a.body, want) {
			t.Errorf("client %d: %d bytes, %v", i, len(a.body), a.err)
		}
	}
	for _, r := range rs {
		r.waitCommitted(origin.SHA256(ns, typ, "1.0.0", "linux_amd64"))
	}
	if n := origin.ArchiveHits(ns, typ, "1.0.0", "linux_amd64"); n != 1 {
		t.Errorf("%d origin downloads of the archive, want 1", n)
	}
}

// A sealed replica lists a version it lacks when the shared tier has an
// archive of it; a warm version list asks the shared tier nothing, and an
// answer, once made, stays reusable for sharedtier.SeenTTL. What the
// shared tier lacked is asked again after it, and a version stored there
// meanwhile listed.
func TestSharedSealedListRemembers(t *testing.T) {
	srv, rs := newReplicas(t, 1, nil)
	origin := rs[0].origin
	origin.AddProvider(ns, typ, []string{"1.0.0", "2.0.0", "3.0.0"}, platforms)
	if a := rs[0].read(context.Background(), "1.0.0", "linux_amd64"); a.err != nil {
		t.Fatal(a.err)
	}
	if _, err := rs[0].packages("2.0.0", "linux_amd64"); err != nil { // its record, no archive
		t.Fatal(err)
	}
	rs[0].waitIdle()

	counts := &sharedCounts{}
	clock := enginetest.NewFakeClock()
	sealed := &harness{t: t, origin: origin}
	sealed.start(harnessOptions{cfg: Config{Offline: true, Now: clock.Now, Shared: sharedTier{newSharedStore(t, srv, "sealed", counts)}}})
	calls := func() int {
		counts.mu.Lock()
		defer counts.mu.Unlock()
		n := 0
		for _, c := range counts.n {
			n += c
		}
		return n
	}
	versionsOf := func(list *records.VersionList) []string {
		var vs []string
		for _, e := range list.Versions {
			vs = append(vs, e.Version)
		}
		return vs
	}
	var stamp Stamp
	for i := range 2 {
		list, st, err := sealed.engine.Versions(context.Background(), sealed.provider())
		if err != nil {
			t.Fatal(err)
		}
		if got := versionsOf(list); !slices.Equal(got, []string{"1.0.0"}) {
			t.Fatalf("call %d: versions %v, want the one the shared tier has an archive of", i+1, got)
		}
		stamp = st.Stamp
	}
	if !sealed.engine.Reuse(stamp) {
		t.Error("a warm sealed version list is not reusable")
	}
	before := calls()
	for i := range 5 {
		list, st, err := sealed.engine.Versions(context.Background(), sealed.provider())
		if err != nil || len(list.Versions) != 1 {
			t.Fatalf("warm call %d: %v", i+1, err)
		}
		if !sealed.engine.Reuse(st.Stamp) {
			t.Errorf("warm call %d: its answer is not reusable", i+1)
		}
	}
	if n := calls() - before; n != 0 {
		counts.mu.Lock()
		t.Errorf("5 warm version lists made %d shared store requests (%v), want 0", n, counts.n)
		counts.mu.Unlock()
	}

	if a := rs[0].read(context.Background(), "3.0.0", "linux_amd64"); a.err != nil {
		t.Fatal(a.err)
	}
	rs[0].waitIdle()
	clock.Add(sharedtier.SeenTTL)
	if sealed.engine.Reuse(stamp) {
		t.Error("a sealed version list answer is still reusable after sharedtier.SeenTTL: a front door would keep it, without the version stored in the shared tier since")
	}
	list, _, err := sealed.engine.Versions(context.Background(), sealed.provider())
	if err != nil {
		t.Fatal(err)
	}
	if got := versionsOf(list); !slices.Equal(got, []string{"1.0.0", "3.0.0"}) {
		t.Errorf("after sharedtier.SeenTTL: versions %v, want 1.0.0 and 3.0.0, stored in the shared tier meanwhile", got)
	}
}

// The engine composes its stored records: without a shared tier its parts
// take the records themselves (nothing of the tier between them and the
// cache); with one, the tier decorating them.
func TestRecordSourceComposed(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	if h.engine.source != recordSource(h.engine.memo) {
		t.Errorf("without a shared tier the parts take %T, want the stored records", h.engine.source)
	}
	h = newHarness(t, harnessOptions{cfg: Config{Shared: &blockingTier{gate: make(chan struct{})}}})
	if _, ok := h.engine.source.(*sharedtier.Shared); !ok {
		t.Errorf("with a shared tier the parts take %T, want the tier over the stored records", h.engine.source)
	}
}

// heldTier is the bucket, but the first read of key, once read, waits,
// after saying so on asked, until release is closed, and answers what it
// read.
type heldTier struct {
	sharedTier
	key            string
	held           atomic.Bool
	asked, release chan struct{}
}

func (h *heldTier) GetMeta(ctx context.Context, key string) (json.RawMessage, time.Time, error) {
	raw, at, err := h.sharedTier.GetMeta(ctx, key)
	if key == h.key && h.held.CompareAndSwap(false, true) {
		close(h.asked)
		<-h.release
	}
	return raw, at, err
}

// A package record copied from the shared tier into a replica's cache
// does not write over one the replica stored while the tier was asked
// (its own fetch of a platform the tier's copy lacks, here; an import,
// whose packages may not be fetched again, alike): the copy goes in turn
// with the version's other writers, and the record stored first stays.
func TestSharedCopyKeepsARecordStoredMeanwhile(t *testing.T) {
	srv, rs := newReplicas(t, 1, nil)
	if _, err := rs[0].packages("1.0.0", "linux_amd64"); err != nil {
		t.Fatal(err)
	}
	rs[0].waitIdle()
	v := mustVersion(t, "1.0.0")
	held := &heldTier{sharedTier: sharedTier{newSharedStore(t, srv, "b", nil)},
		key: records.PackageKey(rs[0].provider(), v), asked: make(chan struct{}), release: make(chan struct{})}
	b := &harness{t: t, origin: rs[0].origin}
	b.start(harnessOptions{cfg: Config{Shared: held}})

	first := make(chan error, 1)
	go func() {
		_, err := b.packages("1.0.0", "linux_amd64")
		first <- err
	}()
	<-held.asked
	// Meanwhile, a platform the tier's copy lacks: fetched and stored.
	if _, err := b.packages("1.0.0", "darwin_arm64"); err != nil {
		t.Fatal(err)
	}
	close(held.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	b.waitIdle()
	var rec records.PackageRecord
	if _, err := b.store.GetMeta(records.PackageKey(b.provider(), v), &rec); err != nil {
		t.Fatal(err)
	}
	if _, ok := rec.Archives["darwin_arm64"]; !ok {
		t.Errorf("the cache's record has the platforms %v: the tier's copy wrote over the darwin_arm64 stored meanwhile", slices.Sorted(maps.Keys(rec.Archives)))
	}
}
