package sharedstore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
	"github.com/tfmirror/tfmirror/v2/sharedstore"
)

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// observer counts observations.
type observer struct {
	mu   sync.Mutex
	reqs map[string]int // op/outcome
	down atomic.Bool
	// conditional is 0 before a probe's report, then 1 ignored, 2 honoured.
	conditional atomic.Int32
	rejected    map[string]int // by kind
}

func (o *observer) SharedStoreRejected(kind string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.rejected == nil {
		o.rejected = map[string]int{}
	}
	o.rejected[kind]++
}

func (o *observer) rejections(kind string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.rejected[kind]
}

// testKey is the replicas' key in these tests.
var testKey = bytes.Repeat([]byte("k"), sharedstore.MinKeyBytes)

func testKeys(t *testing.T) *sharedstore.Keys {
	t.Helper()
	k, err := sharedstore.NewKeys(testKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (o *observer) SharedStoreRequest(op, outcome string, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.reqs == nil {
		o.reqs = map[string]int{}
	}
	o.reqs[op+"/"+outcome]++
}
func (o *observer) SharedStoreDown(down bool) { o.down.Store(down) }
func (o *observer) SharedStoreConditional(ok bool) {
	if ok {
		o.conditional.Store(2)
	} else {
		o.conditional.Store(1)
	}
}
func (o *observer) count(k string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.reqs[k]
}

func open(t *testing.T, srv *s3test.Server, holder string, c *clock, obs sharedstore.Observer) *sharedstore.Store {
	t.Helper()
	cfg := sharedstore.Config{URL: srv.URL("tfm", "replicas/a"), Holder: holder, LeaseTTL: 30 * time.Second,
		CallTimeout: 5 * time.Second, BreakerThreshold: 2, BreakerCooldown: time.Minute, Keys: testKeys(t)}
	if c != nil {
		cfg.Now = c.Now
	}
	if obs != nil {
		cfg.Observer = obs
	}
	s, err := sharedstore.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func startServer(t *testing.T) *s3test.Server {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	srv.CreateBucket("tfm")
	return srv
}

func shaOf(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func TestParseURL(t *testing.T) {
	loc, err := sharedstore.ParseURL("s3://bkt/some/prefix/?endpoint=http://127.0.0.1:9000&region=eu-west-1&path_style=true")
	if err != nil {
		t.Fatal(err)
	}
	want := sharedstore.Location{Bucket: "bkt", Prefix: "some/prefix/", Endpoint: "http://127.0.0.1:9000", Region: "eu-west-1", PathStyle: true}
	if loc != want {
		t.Errorf("got %+v, want %+v", loc, want)
	}
	if loc, err := sharedstore.ParseURL("s3://bkt"); err != nil || loc.Prefix != "" || loc.PathStyle {
		t.Errorf("s3://bkt: %+v, %v", loc, err)
	}
	for _, bad := range []string{"http://bkt/p", "s3:///p", "s3://bkt/p?foo=1", "s3://bkt/p?path_style=maybe",
		"s3://bkt/p?endpoint=ftp://x", "s3://u:p@bkt/p", "s3://bkt/p?region=a&region=b",
		// No host, a port out of range, a port on a bucket: net/http
		// dials an empty host as this system.
		"s3://bkt/p?endpoint=http://:9000", "s3://bkt/p?endpoint=http://minio.corp:99999", "s3://bkt/p?endpoint=http://minio.corp:0", "s3://bkt:9000/p", "s3://:9000/p", "s3://bkt:/p"} {
		if _, err := sharedstore.ParseURL(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// An archive is stored once under its sha256, read back whole, and the
// store refuses bytes that do not have the sha256 they are stored under.
func TestArchives(t *testing.T) {
	srv := startServer(t)
	s := open(t, srv, "a", nil, nil)
	ctx := context.Background()
	data := bytes.Repeat([]byte("provider archive "), 10000)
	sha := shaOf(data)

	if body, _, err := s.OpenArchive(ctx, sha); err != nil || body != nil {
		t.Fatalf("absent archive: %v, %v", body, err)
	}
	if err := s.PutArchive(ctx, sha, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	// A second writer (another replica) finds it there: no error.
	if err := s.PutArchive(ctx, sha, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("second put: %v", err)
	}
	body, size, err := s.OpenArchive(ctx, sha)
	if err != nil || body == nil {
		t.Fatalf("open: %v", err)
	}
	got, err := io.ReadAll(body)
	body.Close()
	if err != nil || !bytes.Equal(got, data) || size != int64(len(data)) {
		t.Fatalf("read back %d bytes (size %d), %v", len(got), size, err)
	}

	wrong := append(bytes.Clone(data[:len(data)-1]), 'X')
	other := shaOf(append(bytes.Clone(data), 'Y'))
	if err := s.PutArchive(ctx, other, bytes.NewReader(wrong), int64(len(wrong))); err == nil {
		t.Fatal("bytes with another sha256 were accepted")
	}
	if body, _, err := s.OpenArchive(ctx, other); err != nil || body != nil {
		t.Fatalf("an archive that did not match is visible: %v", err)
	}
	keys := srv.Keys("tfm", "replicas/a/archives/")
	if !slices.Equal(keys, []string{"replicas/a/archives/" + sha}) {
		t.Errorf("bucket holds %q", keys)
	}
}

func TestMeta(t *testing.T) {
	srv := startServer(t)
	// Stopped, but at the store's time: a record stamped long before the
	// store wrote it is a replayed one (TestReplayedRecordRejected).
	c := &clock{now: time.Now().UTC().Truncate(time.Second)}
	s := open(t, srv, "a", c, nil)
	ctx := context.Background()
	if raw, _, err := s.GetMeta(ctx, "versions/registry.terraform.io/hashicorp/random"); err != nil || raw != nil {
		t.Fatalf("absent: %s, %v", raw, err)
	}
	if err := s.PutMeta(ctx, "versions/registry.terraform.io/hashicorp/random", map[string]int{"schema": 2}); err != nil {
		t.Fatal(err)
	}
	raw, at, err := s.GetMeta(ctx, "versions/registry.terraform.io/hashicorp/random")
	if err != nil || string(raw) != `{"schema":2}` || !at.Equal(c.Now()) {
		t.Fatalf("got %s stored at %v, %v", raw, at, err)
	}
}

// skewed is this machine's clock moved by d, as a replica's whose clock
// disagrees with the others'.
func skewed(d time.Duration) func() time.Time { return func() time.Time { return time.Now().Add(d) } }

// openWith opens the test bucket with cfg's Holder, Now and LeaseTTL, at
// cfg's URL when it has one (the bucket's prefix, through a proxy).
func openWith(t *testing.T, srv *s3test.Server, cfg sharedstore.Config) *sharedstore.Store {
	t.Helper()
	if cfg.URL == "" {
		cfg.URL = srv.URL("tfm", "replicas/a")
	}
	cfg.CallTimeout, cfg.BreakerThreshold, cfg.BreakerCooldown = 5*time.Second, 2, time.Minute
	if cfg.SlowCall == 0 {
		// No bound on a slow answer: a 15 MiB read on a loaded machine
		// under -race takes seconds, and these tests are not about a slow
		// store (TestSlowAnswersOpenTheBreaker is, with a store of its own).
		cfg.SlowCall = -1
	}
	if cfg.Keys == nil {
		cfg.Keys = testKeys(t)
	}
	s, err := sharedstore.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Of two replicas, one gets the lease; the other gets it only once the
// first released it or let it expire, by the store's clock: the replicas'
// own clocks, five minutes apart here, do not matter. A holder whose lease
// was taken over learns that it lost it.
func TestLease(t *testing.T) {
	srv := startServer(t)
	// Long enough that no stall of a loaded machine between the first
	// lease and the second replica's try lets the lease expire.
	const ttl = 4 * time.Second
	a := openWith(t, srv, sharedstore.Config{Holder: "a", LeaseTTL: ttl, Now: skewed(-5 * time.Minute)})
	b := openWith(t, srv, sharedstore.Config{Holder: "b", LeaseTTL: ttl})
	ctx := context.Background()
	sha := shaOf([]byte("x"))

	la, err := a.TryLease(ctx, sha)
	if err != nil || la == nil {
		t.Fatalf("first lease: %v, %v", la, err)
	}
	if lb, err := b.TryLease(ctx, sha); err != nil || lb != nil {
		t.Fatalf("a replica whose clock is 5 minutes ahead got the lease held by the first: %v", err)
	}
	// Taken before the renewal, so that no time the answer took to come
	// back counts as time the lease ran.
	renewed := time.Now()
	if err := la.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	// Expired ttl after the renewal by the store's clock, which dates in
	// whole seconds: at least ttl-1s from here.
	var lb *sharedstore.Lease
	for lb == nil {
		if time.Since(renewed) > ttl+10*time.Second {
			t.Fatal("expired lease not taken over")
		}
		if lb, err = b.TryLease(ctx, sha); err != nil {
			t.Fatal(err)
		}
		if lb == nil {
			time.Sleep(100 * time.Millisecond) // for the lease to expire
		}
	}
	if d := time.Since(renewed); d < ttl-time.Second {
		t.Fatalf("lease taken over %v after its renewal, before it expired", d)
	}
	if err := la.Renew(ctx); !errors.Is(err, sharedstore.ErrLeaseLost) {
		t.Fatalf("renewing a lease taken over: %v", err)
	}
	if err := la.Release(ctx); err != nil { // not ours any more: leaves b's alone
		t.Fatal(err)
	}
	if la2, err := a.TryLease(ctx, sha); err != nil || la2 != nil {
		t.Fatalf("old holder's release removed the new lease: %v", err)
	}
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if la3, err := a.TryLease(ctx, sha); err != nil || la3 == nil {
		t.Fatalf("released lease not taken: %v", err)
	}
}

// Of many replicas taking over one expired lease at once, one wins; their
// clocks, an hour behind the store's, do not keep them from seeing it
// expired. The lease lives a millisecond, and the store's answers to the
// replicas are dated half a minute ahead (its clock, as that much
// later): the store dates in whole seconds, and its Date header may lag
// real time by a second or more, so that a lease expired by real time
// may not be yet by the store's. The replicas' own leases live a minute,
// so that the winner's is not expired by that clock.
func TestLeaseTakeoverRace(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	sha := shaOf([]byte("y"))
	dead := openWith(t, srv, sharedstore.Config{Holder: "dead", LeaseTTL: time.Millisecond})
	if l, err := dead.TryLease(ctx, sha); err != nil || l == nil {
		t.Fatal(err)
	}
	later := srv.AheadURL(t, "tfm", "replicas/a", 30*time.Second)
	var won atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		s := openWith(t, srv, sharedstore.Config{URL: later, Holder: string(rune('a' + i)), LeaseTTL: time.Minute, Now: skewed(-time.Hour)})
		wg.Go(func() {
			l, err := s.TryLease(ctx, sha)
			if err != nil {
				t.Error(err)
			}
			if l != nil {
				won.Add(1)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Errorf("%d replicas took the lease over", won.Load())
	}
}

// A store that is down fails calls until the breaker opens; then they fail
// at once, and once it is back and the cooldown over, they succeed.
func TestBreaker(t *testing.T) {
	srv := startServer(t)
	c := &clock{now: time.Now()}
	obs := &observer{}
	s := open(t, srv, "a", c, obs)
	ctx := context.Background()
	if err := s.Check(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	for range 2 {
		if _, _, err := s.GetMeta(ctx, "k"); err == nil || errors.Is(err, sharedstore.ErrUnavailable) {
			t.Fatalf("store down: %v", err)
		}
	}
	if !obs.down.Load() || s.Status() == nil {
		t.Fatal("breaker not open after 2 failures")
	}
	if _, _, err := s.GetMeta(ctx, "k"); !errors.Is(err, sharedstore.ErrUnavailable) {
		t.Fatalf("breaker open: %v", err)
	}
	if n := obs.count("get_meta/unavailable"); n != 1 {
		t.Errorf("%d unavailable calls counted", n)
	}
	srv.Restart()
	c.Add(time.Minute)
	if err := s.PutMeta(ctx, "k", "v"); err != nil {
		t.Fatalf("store back: %v", err)
	}
	if obs.down.Load() || s.Status() != nil {
		t.Error("breaker still open")
	}
	if n := obs.count("get_meta/error"); n != 2 || !strings.Contains(s.Holder(), "a") {
		t.Errorf("%d errors counted", n)
	}
}

// TestFailingBeforeTheBreakerOpens: a store whose calls fail, a start-up
// check's included, is said to be failing (Health) from the first
// failure, with the kind of failure and naming no bucket or endpoint,
// while it is still asked; the status page called it reachable until
// enough calls failed to open its breaker. Open, Health says it is set
// aside, and not failing; answering again, neither.
func TestFailingBeforeTheBreakerOpens(t *testing.T) {
	srv := startServer(t)
	c := &clock{now: time.Now()}
	ctx := context.Background()
	s, err := sharedstore.Open(ctx, sharedstore.Config{URL: srv.URL("tfm", "replicas/a"), Holder: "a", LeaseTTL: 30 * time.Second,
		CallTimeout: 5 * time.Second, SlowCall: -1, BreakerThreshold: 3, BreakerCooldown: time.Minute, Keys: testKeys(t), Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	if setAside, failing := s.Health(); setAside != nil || failing != nil {
		t.Fatalf("before any call: Health %v, %v", setAside, failing)
	}
	srv.Stop()
	if err := s.Check(ctx); err == nil {
		t.Fatal("the start-up check of a stopped store passed")
	}
	setAside, ferr := s.Health()
	if ferr == nil || setAside != nil {
		t.Fatalf("after a failed start-up check: Health %v, %v; want failing, not set aside", setAside, ferr)
	}
	for _, want := range []string{"the last call failed", "connection refused", "set aside after 3 failures in a row"} {
		if !strings.Contains(ferr.Error(), want) {
			t.Errorf("failing %q lacks %q", ferr, want)
		}
	}
	if strings.Contains(ferr.Error(), "tfm") || strings.Contains(ferr.Error(), srv.Endpoint()) {
		t.Errorf("failing names the bucket or the endpoint, which the status page shows to anyone: %v", ferr)
	}
	if _, _, err := s.GetMeta(ctx, "k"); err == nil {
		t.Fatal("a call to a stopped store succeeded")
	}
	if _, ferr := s.Health(); ferr == nil || !strings.Contains(ferr.Error(), "the last 2 calls failed") {
		t.Errorf("after two failures: failing %v", ferr)
	}
	if _, _, err := s.GetMeta(ctx, "k"); err == nil {
		t.Fatal("a call to a stopped store succeeded")
	}
	if setAside, ferr := s.Health(); setAside == nil || ferr != nil {
		t.Errorf("breaker open: Health %v, %v; want it set aside alone", setAside, ferr)
	}
	srv.Restart()
	c.Add(time.Minute)
	if err := s.PutMeta(ctx, "k", "v"); err != nil {
		t.Fatalf("store back: %v", err)
	}
	if setAside, ferr := s.Health(); setAside != nil || ferr != nil {
		t.Errorf("answering again: Health %v, %v", setAside, ferr)
	}
}
