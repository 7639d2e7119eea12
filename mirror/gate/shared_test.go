package gate_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/sharedtier"
	"github.com/tfmirror/tfmirror/v2/policy"
	"github.com/tfmirror/tfmirror/v2/sharedstore"
)

// bucketTier is a sharedstore.Store as the engine's shared tier.
type bucketTier struct{ *sharedstore.Store }

func (t bucketTier) TryLease(ctx context.Context, sha string) (sharedtier.Lease, error) {
	l, err := t.Store.TryLease(ctx, sha)
	if l == nil {
		return nil, err
	}
	return l, err
}

// rejections counts the objects a store rejected, by kind.
type rejections struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *rejections) SharedStoreRequest(string, string, time.Duration) {}
func (r *rejections) SharedStoreDown(bool)                             {}
func (r *rejections) SharedStoreConditional(bool)                      {}
func (r *rejections) SharedStoreRejected(kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[kind]++
}

func (r *rejections) of(kind string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[kind]
}

// A writer of the bucket who kept a module's version list from months
// ago puts it back once a new version is out. A replica started with an
// empty cache then lists the module: taking the old list as the one
// before its own, it would date the new version months back, and write
// that date to the bucket, where a replica that had listed the module
// before, listing it again, takes it as the date of the replica that saw
// the version first: the version would pass a minimum release age of
// 72h an hour after it was listed. The old list is refused instead (put
// back long after it was stored), counted, and the new version stays
// held on that replica. (The replica with the empty cache finds no list
// before its own, as in a new bucket: its listing is a first one.)
func TestModuleReleaseAgeReplayedListing(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	srv.CreateBucket("tfm")
	keys, err := sharedstore.NewKeys(bytes.Repeat([]byte("k"), sharedstore.MinKeyBytes), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	open := func(name string, now func() time.Time, obs sharedstore.Observer) *sharedstore.Store {
		cfg := sharedstore.Config{URL: srv.URL("tfm", "replicas"), Holder: name, Keys: keys, CallTimeout: 5 * time.Second, Now: now}
		if obs != nil {
			cfg.Observer = obs
		}
		s, err := sharedstore.Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	clock := enginetest.NewFakeClock()
	clock.Set(time.Now().Truncate(time.Second))
	listKey := records.ModuleVersionsKey(harness.Module)

	// The list a replica stored ninety days ago.
	monthsAgo := time.Now().Add(-90 * day)
	old := open("old", func() time.Time { return monthsAgo }, nil)
	if err := old.PutMeta(ctx, listKey, &records.ModuleVersionList{Schema: records.Schema, Versions: []string{"1.0.0"}, ListedAt: monthsAgo}); err != nil {
		t.Fatal(err)
	}
	obj, err := srv.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("tfm"), Key: aws.String("replicas/meta/" + listKey)})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := io.ReadAll(obj.Body)
	obj.Body.Close()
	if err != nil {
		t.Fatal(err)
	}

	a := harness.New(t, harness.Options{Config: harness.Config{Now: clock.Now, VersionsTTL: time.Minute, Shared: bucketTier{open("a", nil, nil)}}})
	a.Origin.AddTarball("vpc.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc\n")}))
	a.Origin.AddModule(harness.Module.Namespace, harness.Module.Name, harness.Module.System, "1.0.0", a.Origin.TarballURL("vpc.tar.gz"))
	if _, _, err := a.Engine.Modules().ModuleVersions(ctx, harness.Module); err != nil {
		t.Fatal(err)
	}
	a.WaitIdle()

	a.Origin.AddModule(harness.Module.Namespace, harness.Module.Name, harness.Module.System, "1.1.0", a.Origin.TarballURL("vpc.tar.gz"))
	clock.Set(clock.Now().Add(time.Hour))
	if _, err := srv.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("tfm"), Key: aws.String("replicas/meta/" + listKey),
		Body: bytes.NewReader(kept)}); err != nil {
		t.Fatal(err)
	}
	seen := &rejections{}
	c := &harness.Harness{T: t, Origin: a.Origin}
	c.Start(harness.Options{Config: harness.Config{Now: clock.Now, VersionsTTL: time.Minute, Shared: bucketTier{open("c", nil, seen)}}})
	if _, _, err := c.Engine.Modules().ModuleVersions(ctx, harness.Module); err != nil {
		t.Fatal(err)
	}
	c.WaitIdle()
	if n := seen.of("module_versions"); n == 0 {
		t.Error("the list put back was not rejected")
	}

	clock.Set(clock.Now().Add(time.Hour))
	if _, _, err := a.Engine.Modules().ModuleVersions(ctx, harness.Module); err != nil {
		t.Fatal(err)
	}
	a.WaitIdle()
	a.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	_, err = a.Engine.Modules().ModuleLocation(ctx, harness.Module, enginetest.MustModuleVersion(t, "1.1.0"))
	var perr *gate.PolicyError
	if !errors.As(err, &perr) || perr.Verdict.Rule != policy.RuleMinReleaseAge {
		t.Errorf("module location of 1.1.0, listed first two hours ago: %v, want held by its minimum release age", err)
	}
}
