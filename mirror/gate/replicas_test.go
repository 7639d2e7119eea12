package gate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/mirror/sharedtier"
	"github.com/tfmirror/tfmirror/v2/policy"
	"github.com/tfmirror/tfmirror/v2/sharedstore"
)

// releaseRig is one provider or module of the release dating tests:
// how a version is published (and taken out of the origin's listings
// again: withdraw), how a replica lists, and its verdict on a version;
// kind and address are how the dating records key it; clock is the
// replicas' fake clock.
type releaseRig struct {
	kind, address string
	clock         *enginetest.FakeClock
	publish       func(v string)
	withdraw      func(v string)
	list          func(h *harness.Harness)
	verdict       func(h *harness.Harness, v string) error
}

// newReleaseRig is the rig of kind on o; a provider's versions are
// signed a year before the clock's time, long before any listing.
func newReleaseRig(t *testing.T, kind string, o *fakeorigin.Origin, clock *enginetest.FakeClock) releaseRig {
	t.Helper()
	ctx := context.Background()
	m := harness.Module
	signedAt := clock.Now().Add(-365 * day)
	switch kind {
	case "provider":
		return releaseRig{
			kind: kind, address: addrs.Provider{Hostname: harness.OriginHost, Namespace: harness.NS, Type: harness.Type}.String(), clock: clock,
			publish: func(v string) {
				o.AddProvider(harness.NS, harness.Type, []string{v}, []string{"linux_amd64"})
				o.SetSignedAt(harness.NS, harness.Type, v, signedAt)
			},
			withdraw: func(v string) { o.RemoveVersion(harness.NS, harness.Type, v) },
			list:     func(h *harness.Harness) { h.Listed() },
			verdict:  func(h *harness.Harness, v string) error { _, err := h.Packages(v); return err },
		}
	default:
		o.AddTarball("vpc.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc\n")}))
		return releaseRig{
			kind: kind, address: m.String(), clock: clock,
			publish:  func(v string) { o.AddModule(m.Namespace, m.Name, m.System, v, o.TarballURL("vpc.tar.gz")) },
			withdraw: func(v string) { o.RemoveModule(m.Namespace, m.Name, m.System, v) },
			list: func(h *harness.Harness) {
				if _, _, err := h.Engine.Modules().ModuleVersions(ctx, m); err != nil {
					t.Fatal(err)
				}
			},
			verdict: func(h *harness.Harness, v string) error {
				_, err := h.Engine.Modules().ModuleLocation(ctx, m, enginetest.MustModuleVersion(t, v))
				return err
			},
		}
	}
}

// listAt has h list an hour after the clock's time, waits until h is
// idle, and returns the time of the listing.
func (rig releaseRig) listAt(h *harness.Harness) time.Time {
	rig.clock.Add(time.Hour)
	rig.list(h)
	h.WaitIdle()
	return rig.clock.Now()
}

// datingKey is the key of the dating record of version v (under the
// bucket's records).
func (rig releaseRig) datingKey(v string) string {
	return "release/absent/" + rig.kind + "/" + rig.address + "/" + v
}

// heldUntil checks that err is the minimum release age's refusal until
// until.
func heldUntil(t *testing.T, what string, err error, until time.Time) {
	t.Helper()
	var perr *gate.PolicyError
	if !errors.As(err, &perr) || perr.Verdict.Rule != policy.RuleMinReleaseAge || !perr.Verdict.AvailableAt.Equal(until) {
		t.Errorf("%s: %v, want held by the minimum release age until %v", what, err, until)
	}
}

// replicas are replicas of a mirror on one versitygw bucket, sharing a
// fake clock and the origin of the first, a, which lists the provider or
// module of the rig. Each reaches the bucket through an outageTier on
// down, datings and written: the bucket does not answer while down is
// set, datings counts the dating records asked of it by any replica, and
// written those written to it.
type replicas struct {
	releaseRig
	srv              *s3test.Server
	open             func(name string) bucketTier
	down             atomic.Bool
	datings, written atomic.Int64
	a                *harness.Harness
	// first is the time of a's first listing (newListedTwice, newLongListing).
	first time.Time
}

// newReplicas starts the bucket and replica a, the rig's clock set to
// the time (to the second); nothing is published yet.
func newReplicas(t *testing.T, kind string) *replicas {
	t.Helper()
	srv := s3test.Start(t)
	clock := enginetest.NewFakeClock()
	clock.Set(time.Now().Truncate(time.Second))
	a := &harness.Harness{T: t, Origin: enginetest.StartOrigin(t, fakeorigin.Options{})}
	r := &replicas{releaseRig: newReleaseRig(t, kind, a.Origin, clock), srv: srv, open: bucketOn(t, srv), a: a}
	a.Start(harness.Options{Config: r.cfg("a")})
	return r
}

// newListedTwice is newReplicas once a has listed 1.0.0 (the first
// listing, at first), then again with 1.1.0 published since (a
// provider's signed a year before), an hour apart.
func newListedTwice(t *testing.T, kind string) *replicas {
	t.Helper()
	r := newReplicas(t, kind)
	r.publish("1.0.0")
	r.first = r.listAt(r.a)
	r.publish("1.1.0")
	r.listAt(r.a)
	return r
}

// newLongListing is newReplicas of a module of 301 minor version lines
// (0.9.0, 1.0.0 to 1.299.0) once a has listed it (the first listing, at
// first), then again with 1.10.1 published since (a backport into an
// old line: not among the 256 versions a first listing looks up), which
// a dates.
func newLongListing(t *testing.T) *replicas {
	t.Helper()
	r := newReplicas(t, "module")
	r.publish("0.9.0")
	for i := range 300 {
		r.publish(fmt.Sprintf("1.%d.0", i))
	}
	r.first = r.listAt(r.a)
	r.publish("1.10.1")
	r.listAt(r.a)
	return r
}

// blindReplica starts replica name with an empty cache and has it list
// while the bucket does not answer (its first listing blind); the bucket
// answers again when it returns.
func (r *replicas) blindReplica(t *testing.T, name string) *harness.Harness {
	t.Helper()
	r.down.Store(true)
	defer r.down.Store(false)
	h := r.replica(t, r.cfg(name))
	r.listAt(h)
	return h
}

// cfg is the configuration of replica name: the rig's clock, a version
// list's time to live of a minute, the bucket.
func (r *replicas) cfg(name string) harness.Config {
	return harness.Config{Now: r.clock.Now, VersionsTTL: time.Minute, Shared: outageTier{r.open(name), &r.down, &r.datings, &r.written}}
}

// replica starts a replica configured with cfg, with an empty cache, in
// front of a's origin.
func (r *replicas) replica(t *testing.T, cfg harness.Config) *harness.Harness {
	t.Helper()
	h := &harness.Harness{T: t, Origin: r.a.Origin}
	h.Start(harness.Options{Config: cfg})
	return h
}

// deleteRecord deletes the record keyed by key (under the bucket's
// records) from the bucket, as a writer of the bucket without its key
// can; the bucket must hold it.
func (r *replicas) deleteRecord(t *testing.T, key string) {
	t.Helper()
	ctx := context.Background()
	object := "replicas/meta/" + key
	if _, err := r.srv.Client().HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("tfm"), Key: aws.String(object)}); err != nil {
		t.Fatalf("the bucket has no %s to delete: %v", object, err)
	}
	if _, err := r.srv.Client().DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("tfm"), Key: aws.String(object)}); err != nil {
		t.Fatal(err)
	}
}

// bucketOn creates the bucket on srv and returns a function that opens
// a store on it for a replica.
func bucketOn(t *testing.T, srv *s3test.Server) func(name string) bucketTier {
	t.Helper()
	srv.SetEnv(t)
	srv.CreateBucket("tfm")
	keys, err := sharedstore.NewKeys(bytes.Repeat([]byte("k"), sharedstore.MinKeyBytes), nil)
	if err != nil {
		t.Fatal(err)
	}
	return func(name string) bucketTier {
		s, err := sharedstore.Open(context.Background(), sharedstore.Config{URL: srv.URL("tfm", "replicas"), Holder: name, Keys: keys, CallTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return bucketTier{s}
	}
}

// outageTier is a bucketTier that does not answer while down is set:
// every call fails, as when the bucket is unreachable. datings counts
// the dating records asked of it, written those written to it.
type outageTier struct {
	bucketTier
	down             *atomic.Bool
	datings, written *atomic.Int64
}

var errNoAnswer = errors.New("dial tcp: connection refused")

func (o outageTier) GetMeta(ctx context.Context, key string) (json.RawMessage, time.Time, error) {
	if o.down.Load() {
		return nil, time.Time{}, errNoAnswer
	}
	if strings.Contains(key, "release/absent/") {
		o.datings.Add(1)
	}
	return o.bucketTier.GetMeta(ctx, key)
}

func (o outageTier) PutMeta(ctx context.Context, key string, record any) error {
	if o.down.Load() {
		return errNoAnswer
	}
	if strings.Contains(key, "release/absent/") {
		o.written.Add(1)
	}
	return o.bucketTier.PutMeta(ctx, key, record)
}

func (o outageTier) OpenArchive(ctx context.Context, sha string) (io.ReadCloser, int64, error) {
	if o.down.Load() {
		return nil, 0, errNoAnswer
	}
	return o.bucketTier.OpenArchive(ctx, sha)
}

func (o outageTier) PutArchive(ctx context.Context, sha string, r io.ReadSeeker, size int64) error {
	if o.down.Load() {
		return errNoAnswer
	}
	return o.bucketTier.PutArchive(ctx, sha, r, size)
}

func (o outageTier) TryLease(ctx context.Context, sha string) (sharedtier.Lease, error) {
	if o.down.Load() {
		return nil, errNoAnswer
	}
	return o.bucketTier.TryLease(ctx, sha)
}
