package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
)

const sharedBucket = "tfm"

// sharedSetup is a versitygw bucket, a fake origin and the flags of
// replicas sharing the bucket.
type sharedSetup struct {
	srv    *s3test.Server
	origin *fakeorigin.Origin
	bin    string
	caFile string
	flags  []string
}

func newSharedSetup(t *testing.T, platforms ...string) *sharedSetup {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := s3test.Start(t)
	srv.SetEnv(t) // the replicas' credentials, inherited from this process
	srv.CreateBucket(sharedBucket)
	origin, err := fakeorigin.Start(fakeorigin.Options{ArchiveSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	origin.AddProvider("hashicorp", "random", []string{"1.0.0"}, platforms)
	return &sharedSetup{srv: srv, origin: origin, bin: buildBinary(t), caFile: originCAFile(t, origin),
		flags: []string{"--shared-store", srv.URL(sharedBucket, "mirror"), "--shared-store-lease-ttl", liveLeaseTTL,
			"--shared-store-timeout", sharedCallTimeout, "--shared-store-key-file", keyFile(t, 'r')}}
}

// liveLeaseTTL is the lease TTL of the replicas of these tests, the
// mirror's default: a holder renews its lease every third of it, and a
// loaded machine has held up a renewal long enough that a lease of 3 s
// (2 s by the store's clock, which dates in whole seconds) expired under
// a live holder, and another replica downloaded the archive too. A test
// of a holder that dies takes deadLeaseTTL.
const liveLeaseTTL = "30s"

// sharedCallTimeout bounds each of the replicas' calls to the store, the
// longest allowed: a write to the store is best effort, dropped when its
// call fails, and a loaded machine has taken versitygw past the default
// 10 s, so that a test waiting for the write never saw it.
const sharedCallTimeout = "2m"

// deadLeaseTTL is the lease TTL of a test whose lease holder is killed,
// the shortest allowed: the others take over once it expires.
const deadLeaseTTL = "3s"

// withLeaseTTL makes the replicas s starts from now on take leases of ttl.
func (s *sharedSetup) withLeaseTTL(ttl string) {
	i := slices.Index(s.flags, "--shared-store-lease-ttl")
	s.flags[i+1] = ttl
}

func (s *sharedSetup) start(t *testing.T, extra ...string) *proc {
	t.Helper()
	return startProcess(t, s.bin, filepath.Join(t.TempDir(), "data"), s.origin, s.caFile, append(slices.Clone(s.flags), extra...)...)
}

func (s *sharedSetup) path(pl string) string {
	return providerArchivePath(s.origin, "hashicorp", "random", "1.0.0", pl)
}

func (s *sharedSetup) archive(pl string) []byte {
	return s.origin.Archive("hashicorp", "random", "1.0.0", pl)
}

func (s *sharedSetup) hits(pl string) int {
	return s.origin.ArchiveHits("hashicorp", "random", "1.0.0", pl)
}

// keyFile writes a shared store key of 32 bytes c to a new file.
func keyFile(t *testing.T, c byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "shared-store.key")
	if err := os.WriteFile(path, bytes.Repeat([]byte{c}, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// metric returns the value of one series on p's /metrics (0 if absent).
func (p *proc) metric(t *testing.T, series string) float64 {
	t.Helper()
	body, _, err := p.get(context.Background(), "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return 0
}

func leaseSeries(outcome string) string {
	return `tfmirror_shared_store_requests_total{operation="lease",outcome="` + outcome + `"}`
}

// waitLeases waits (polling /metrics, at most 60s) until one of ms took
// the lease on an origin download and every other one found it held, and
// returns the holder's index.
func waitLeases(t *testing.T, ms []*proc) int {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(60 * time.Second)
	for {
		holder, waiting := -1, 0
		for i, m := range ms {
			if m.metric(t, leaseSeries("ok")) > 0 {
				holder = i
			} else if m.metric(t, leaseSeries("held")) > 0 {
				waiting++
			}
		}
		if holder >= 0 && waiting == len(ms)-1 {
			return holder
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("replicas did not settle on one lease holder (holder %d, %d waiting)", holder, waiting)
		}
	}
}

// wantSharedOnPage checks what m's status page shows of its shared store,
// as an operator comparing replicas reads it: its location, its endpoint
// and its store ID, the one m logged at start and authenticates objects
// with; no credential, in the JSON or the HTML.
func wantSharedOnPage(t *testing.T, m *proc, location, endpoint, storeID string) {
	t.Helper()
	logged, _ := m.waitLog("shared store objects authenticated", 30*time.Second)["store_id"].(string)
	if logged != storeID {
		t.Errorf("logged store_id %q, want %q", logged, storeID)
	}
	st := m.status(t).SharedStore
	if st == nil {
		t.Fatal("the status page shows no shared store")
	}
	if st.Location != location || st.Endpoint != endpoint || st.StoreID != storeID {
		t.Errorf("status page shared_store %+v, want location %q, endpoint %q, store_id %q", *st, location, endpoint, storeID)
	}
	ctx := context.Background()
	for _, path := range []string{"/?format=json", "/"} {
		body, _, err := m.get(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		if path == "/" && !bytes.Contains(body, []byte("store ID <code>"+storeID+"</code>")) {
			t.Errorf("the status page's HTML does not show the store ID %q", storeID)
		}
		for _, secret := range []string{s3test.SecretKey, strings.Repeat("r", 32)} {
			if bytes.Contains(body, []byte(secret)) {
				t.Errorf("status page %s shows a credential %q", path, secret)
			}
		}
	}
}

func waitStarted(t *testing.T, o *fakeorigin.Origin) {
	t.Helper()
	select {
	case <-o.ArchiveStarted():
	case <-time.After(60 * time.Second):
		t.Fatal("no origin archive download started")
	}
}

// Three `tfmirror serve` replicas on one bucket: 30 clients at once, one
// origin download; a sealed replica with an empty cache serves what they
// cached; with the store stopped the replicas serve from their caches and
// the origin and count the failures; with the store back they share again.
func TestSharedStoreReplicas(t *testing.T) {
	s := newSharedSetup(t, "linux_amd64", "darwin_arm64", "windows_amd64")
	ms := []*proc{s.start(t), s.start(t), s.start(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	want := s.archive("linux_amd64")
	ms[0].waitLog("shared store reachable", 30*time.Second)
	ms[0].waitLog("shared store honours conditional writes", 30*time.Second)
	if n := ms[0].metric(t, "tfmirror_shared_store_conditional_writes"); n != 1 {
		t.Errorf("tfmirror_shared_store_conditional_writes = %v, want 1", n)
	}
	for i, m := range ms {
		wantSharedOnPage(t, m, "s3://"+sharedBucket+"/mirror/", s.srv.Endpoint(), "s3://"+sharedBucket+"/mirror/")
		if i > 0 && m.status(t).SharedStore.StoreID != ms[0].status(t).SharedStore.StoreID {
			t.Errorf("replica %d shows another store ID than replica 0", i)
		}
	}

	release := s.origin.GateArchives()
	defer release()
	errs, wait := getSpread(ctx, ms, 30, s.path("linux_amd64"), want)
	waitStarted(t, s.origin)
	waitLeases(t, ms)
	release()
	wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("client %d: %v", i, err)
		}
	}
	if n := s.hits("linux_amd64"); n != 1 {
		t.Errorf("%d origin downloads, want 1", n)
	}

	// A sealed replica with an empty cache.
	sealed := s.start(t, "--offline")
	if body, _, err := sealed.get(ctx, s.path("linux_amd64")); err != nil || !bytes.Equal(body, want) {
		t.Fatalf("sealed replica: %v (%d bytes)", err, len(body))
	}
	if n := s.hits("linux_amd64"); n != 1 {
		t.Errorf("%d origin downloads after the sealed replica served it", n)
	}

	// The store stopped.
	s.srv.Stop()
	if body, _, err := ms[0].get(ctx, s.path("darwin_arm64")); err != nil || !bytes.Equal(body, s.archive("darwin_arm64")) {
		t.Fatalf("store down, new archive: %v", err)
	}
	if body, resp, err := ms[1].get(ctx, s.path("linux_amd64")); err != nil || !bytes.Equal(body, want) || resp.Header.Get("X-Tfmirror-Cache") != "hit" {
		t.Fatalf("store down, cached archive: %v", err)
	}
	if n := ms[0].metric(t, `tfmirror_shared_store_requests_total{operation="get_archive",outcome="error"}`); n < 1 {
		t.Errorf("the failing store is not in the metrics (%v get_archive errors)", n)
	}
	if _, resp, err := ms[0].get(ctx, "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("a replica with its store down is not ready: %v", err)
	}

	// The store back.
	s.srv.Restart()
	for i, m := range ms[:2] {
		if body, _, err := m.get(ctx, s.path("windows_amd64")); err != nil || !bytes.Equal(body, s.archive("windows_amd64")) {
			t.Fatalf("store back, replica %d: %v", i, err)
		}
		waitCached(t, m, 3-i) // the first has darwin_arm64 too
	}
	if n := s.hits("windows_amd64"); n != 1 {
		t.Errorf("%d origin downloads with the store back, want 1", n)
	}
}

// A replica whose bucket does not exist says so in its log when it starts,
// and on its status page's Health list (failing, still asked: the page
// called it reachable until enough calls failed to open its breaker), and
// serves from the origin all the same.
func TestSharedStoreCheckedAtStart(t *testing.T) {
	s := newSharedSetup(t, "linux_amd64")
	flags := []string{"--shared-store", s.srv.URL("no-such-bucket", "mirror"), "--shared-store-key-file", keyFile(t, 'r'),
		"--shared-store-id", "prod-mirrors"}
	m := startProcess(t, s.bin, filepath.Join(t.TempDir(), "data"), s.origin, s.caFile, flags...)
	m.waitLog("shared store check failed at start-up; serving from the local cache and the origins until it answers", 30*time.Second)
	if h := m.status(t).Health; h.SharedStore != "failing" || !strings.Contains(h.SharedStoreError, "the last call failed, the last with HTTP status 404") {
		t.Errorf("after a failed start-up check, the status page's health says shared store %q (%q), want failing with HTTP status 404",
			h.SharedStore, h.SharedStoreError)
	}
	wantSharedOnPage(t, m, "s3://no-such-bucket/mirror/", s.srv.Endpoint(), "prod-mirrors")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if body, resp, err := m.get(ctx, s.path("linux_amd64")); err != nil || resp.StatusCode != 200 || !bytes.Equal(body, s.archive("linux_amd64")) {
		t.Fatalf("replica with a missing bucket: %v", err)
	}
	if m.logged("shared store reachable") != nil {
		t.Error(`"shared store reachable" logged for a bucket that does not exist`)
	}
}

// The replica holding the lease is killed mid-download: another replica
// takes the download over once the lease expires, its clients get the
// archive, none of the killed replica's clients gets a complete one, and
// the bucket holds the whole archive and no lease.
func TestSharedStoreLeaseHolderKilled(t *testing.T) {
	s := newSharedSetup(t, "linux_amd64")
	s.withLeaseTTL(deadLeaseTTL)
	ms := []*proc{s.start(t), s.start(t), s.start(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	want := s.archive("linux_amd64")

	release := s.origin.GateArchives()
	defer release()
	errs, wait := getSpread(ctx, ms, 9, s.path("linux_amd64"), want)
	waitStarted(t, s.origin)
	holder := waitLeases(t, ms)
	if err := ms[holder].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := ms[holder].wait(30 * time.Second); err == nil {
		t.Fatal("tfmirror exited cleanly after SIGKILL?")
	}
	release()
	wait()
	for i, err := range errs {
		switch {
		case i%len(ms) == holder && err == nil:
			t.Errorf("client %d of the killed replica got a complete archive", i)
		case i%len(ms) != holder && err != nil:
			t.Errorf("client %d: %v", i, err)
		}
	}
	if n := s.hits("linux_amd64"); n != 2 {
		t.Errorf("%d origin downloads, want 2 (the killed one, the one that took over)", n)
	}
	for i, m := range ms {
		if i != holder {
			waitCached(t, m, 1)
		}
	}

	sha := s.origin.SHA256("hashicorp", "random", "1.0.0", "linux_amd64")
	keys := s.srv.Keys(sharedBucket, "mirror/")
	if !slices.Contains(keys, "mirror/archives/"+sha) || slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, "mirror/leases/") }) {
		t.Errorf("bucket holds %q", keys)
	}
	o, err := s.srv.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(sharedBucket), Key: aws.String("mirror/archives/" + sha)})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Body.Close()
	if got, err := io.ReadAll(o.Body); err != nil || !bytes.Equal(got, want) {
		t.Errorf("the bucket's archive is not the archive: %d bytes, %v", len(got), errors.Join(err))
	}
}

// getSpread has n clients ask for path at once, spread round-robin over
// the replicas ms. wait waits for them all; then errs holds each client's
// error, or a wrong-bytes error when its body is not want.
func getSpread(ctx context.Context, ms []*proc, n int, path string, want []byte) (errs []error, wait func()) {
	var wg sync.WaitGroup
	errs = make([]error, n)
	for i := range errs {
		m := ms[i%len(ms)]
		wg.Go(func() {
			body, _, err := m.get(ctx, path)
			if err == nil && !bytes.Equal(body, want) {
				err = fmt.Errorf("wrong bytes (%d)", len(body))
			}
			errs[i] = err
		})
	}
	return errs, wg.Wait
}
