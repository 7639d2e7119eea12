package gate_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// Two builds of one release (1.1.0+a signed a year ago, 1.1.0+b an hour
// ago) are two versions to the minimum release age: the old one being
// old enough says nothing of the other, which is not older than it. Only
// versions below an old enough one are taken to be as old.
func TestReleaseAgeBuildsOfOneRelease(t *testing.T) {
	t.Parallel()
	h, _ := releaseHarness(t, map[string]time.Duration{"1.0.0": 400 * day, "1.1.0+a": 365 * day, "1.1.0+b": time.Hour}, harness.Config{})
	h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	if got := h.Listed(); !slices.Equal(got, []string{"1.0.0", "1.1.0+a"}) {
		t.Errorf("listed %v, want 1.0.0 and 1.1.0+a", got)
	}
	got := h.Read(context.Background(), "1.1.0+b", "linux_amd64")
	var perr *gate.PolicyError
	if !errors.As(got.Err, &perr) || perr.Verdict.Rule != policy.RuleMinReleaseAge {
		t.Errorf("archive of 1.1.0+b, signed an hour ago: %v, want held by its minimum release age", got.Err)
	}
	if got := h.Read(context.Background(), "1.1.0+a", "linux_amd64"); got.Err != nil {
		t.Errorf("archive of 1.1.0+a: %v", got.Err)
	}
}

// A module version asked for with build metadata the origin does not
// list ("1.1.0+build" where it lists 1.1.0) has no release time known,
// and is held while a minimum release age applies; an origin listing one
// version in two spellings ("1.1.0" and "v1.1.0") has one version, which
// one deny refuses in every spelling asked.
func TestModuleVersionsOfOneRelease(t *testing.T) {
	t.Parallel()
	clock := enginetest.NewFakeClock()
	clock.Set(time.Now().Truncate(time.Second).Add(30 * day))
	h := harness.New(t, harness.Options{Config: harness.Config{Now: clock.Now, VersionsTTL: time.Minute}})
	h.Origin.AddTarball("vpc.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc\n")}))
	for _, v := range []string{"1.0.0", "1.1.0", "v1.1.0"} {
		h.Origin.AddModule(harness.Module.Namespace, harness.Module.Name, harness.Module.System, v, h.Origin.TarballURL("vpc.tar.gz"))
	}
	ctx := context.Background()
	mods := h.Engine.Modules()
	if _, _, err := mods.ModuleVersions(ctx, harness.Module); err != nil {
		t.Fatal(err)
	}
	h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	if _, err := mods.ModuleLocation(ctx, harness.Module, enginetest.MustModuleVersion(t, "1.1.0")); err != nil {
		t.Errorf("1.1.0, in the first listing: %v", err)
	}
	for _, asked := range []string{"1.1.0+build", "v1.1.0+build"} {
		_, err := mods.ModuleLocation(ctx, harness.Module, enginetest.MustModuleVersion(t, asked))
		var perr *gate.PolicyError
		if !errors.As(err, &perr) || perr.Verdict.Rule != policy.RuleMinReleaseAge {
			t.Errorf("module location of %s, which no listing names: %v, want held by its minimum release age", asked, err)
		}
	}
	h.Engine.SetPolicy(enginetest.DecodePolicy(t, `
deny_version "`+harness.Module.String()+`" {
  versions = "= 1.1.0"
  reason   = "broken"
}`))
	for _, asked := range []string{"1.1.0", "v1.1.0", "1.1.0+build"} {
		_, err := mods.ModuleLocation(ctx, harness.Module, enginetest.MustModuleVersion(t, asked))
		var perr *gate.PolicyError
		if !errors.As(err, &perr) || perr.Verdict.Rule != policy.RuleDenyVersion {
			t.Errorf("module location of %s under a deny of 1.1.0: %v, want refused", asked, err)
		}
	}
	list, _, err := mods.ModuleVersions(ctx, harness.Module)
	if err != nil || !slices.Equal(list.Versions, []string{"1.0.0"}) {
		t.Errorf("listed %v, %v under a deny of 1.1.0; want 1.0.0 alone", list, err)
	}
}

// A provider version asked for with build metadata its origin does not
// list ("1.1.0+build" where it lists 1.1.0, old enough) is not served
// under a minimum release age: it is not that version, and nothing
// dates it.
func TestReleaseAgeUnlistedBuild(t *testing.T) {
	t.Parallel()
	h, _ := releaseHarness(t, map[string]time.Duration{"1.1.0": 365 * day}, harness.Config{})
	h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	if got := h.Listed(); !slices.Equal(got, []string{"1.1.0"}) {
		t.Fatalf("listed %v", got)
	}
	if got := h.Read(context.Background(), "1.1.0+build", "linux_amd64"); got.Err == nil || got.Opened {
		t.Errorf("archive of 1.1.0+build: opened %v, %d bytes; want refused", got.Opened, len(got.Body))
	}
	if _, err := h.Packages("1.1.0+build"); err == nil {
		t.Error("package metadata of 1.1.0+build: no error")
	}
}

// A version published into an older line after a newer one (a backport:
// 1.0.1 signed an hour ago beside 1.1.0, a year old), in a provider's
// first listing, is listed as old as the newer one (the listing looks up
// few versions), but its package is judged by its own signature: held
// by a 72h minimum release age, with the time it becomes available. An
// old version below the newer one is served, its signature learned once
// (the gate's lookup: a download answer, SHA256SUMS and its signature).
func TestReleaseAgeBackportInFirstListing(t *testing.T) {
	t.Parallel()
	h, clock := releaseHarness(t, map[string]time.Duration{"1.0.0": 400 * day, "1.0.1": time.Hour, "1.1.0": 365 * day}, harness.Config{})
	h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	if got := h.Listed(); !slices.Equal(got, []string{"1.0.0", "1.0.1", "1.1.0"}) {
		t.Fatalf("listed %v", got)
	}
	got := h.Read(context.Background(), "1.0.1", "linux_amd64")
	var perr *gate.PolicyError
	if !errors.As(got.Err, &perr) || perr.Verdict.Rule != policy.RuleMinReleaseAge {
		t.Fatalf("archive of 1.0.1, signed an hour ago: opened %v (%d bytes), %v; want held by its minimum release age", got.Opened, len(got.Body), got.Err)
	}
	if want := clock.Now().Add(-time.Hour).Add(72 * time.Hour); !perr.Verdict.AvailableAt.Equal(want) {
		t.Errorf("1.0.1 held until %v, want %v (its own signature's time plus 72h)", perr.Verdict.AvailableAt, want)
	}
	if _, err := h.Packages("1.0.1"); !errors.As(err, &perr) {
		t.Errorf("package metadata of 1.0.1: %v, want held", err)
	}
	h.Origin.ResetHits()
	if got := h.Read(context.Background(), "1.0.0", "linux_amd64"); got.Err != nil {
		t.Fatalf("archive of 1.0.0, signed 400 days ago: %v", got.Err)
	}
	// The gate learns its signature time (one SHA256SUMS signature), and
	// the fetch verifies the package with its own.
	if n := h.Origin.Hits(fakeorigin.Signature); n != 2 {
		t.Errorf("serving 1.0.0 fetched %d signatures, want 2 (the gate's, the fetch's)", n)
	}
	h.Origin.ResetHits()
	if got := h.Read(context.Background(), "1.0.0", "linux_amd64"); got.Err != nil || h.Origin.Hits(fakeorigin.Signature) != 0 {
		t.Errorf("archive of 1.0.0 again: %v, %d signatures fetched; want served, none", got.Err, h.Origin.Hits(fakeorigin.Signature))
	}
	clock.Add(72 * time.Hour)
	if got := h.Read(context.Background(), "1.0.1", "linux_amd64"); got.Err != nil {
		t.Errorf("archive of 1.0.1, 73h after it was signed: %v", got.Err)
	}
}

// What the cache knows of a release (export, retention and policy
// explain ask it, without the origin): a version the listing took to be
// as old as a newer one of its line is dated by its own signature when
// the cache holds its package (the backport, signed an hour ago), and
// keeps the newer one's date when nothing here knows its own (1.0.0,
// never fetched: a sealed mirror's record kept before evidence was).
func TestKnownReleaseOfAnInferredVersion(t *testing.T) {
	t.Parallel()
	h, clock := releaseHarness(t, map[string]time.Duration{"1.0.0": 400 * day, "1.0.1": time.Hour, "1.1.0": 365 * day}, harness.Config{})
	ctx := context.Background()
	if got := h.Read(ctx, "1.0.1", "linux_amd64"); got.Err != nil {
		t.Fatal(got.Err) // fetched before any policy applied
	}
	h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	if got := h.Listed(); len(got) != 3 {
		t.Fatalf("listed %v", got)
	}
	h.Origin.ResetHits()
	inv, addr := h.Engine.Inventory(), h.Provider().String()
	rel, err := inv.KnownRelease(ctx, policy.Provider, addr, "1.0.1", 72*time.Hour)
	if want := clock.Now().Add(-time.Hour); err != nil || !rel.Known || !rel.At.Equal(want) {
		t.Errorf("release of 1.0.1: %+v, %v; want known, at %v (its own signature)", rel, err, want)
	}
	rel, err = inv.KnownRelease(ctx, policy.Provider, addr, "1.0.0", 72*time.Hour)
	if want := clock.Now().Add(-365 * day); err != nil || !rel.Known || !rel.At.Equal(want) {
		t.Errorf("release of 1.0.0: %+v, %v; want known, at %v (1.1.0's)", rel, err, want)
	}
	if n := h.Origin.Hits(fakeorigin.Signature); n != 0 {
		t.Errorf("%d signatures fetched, want none", n)
	}
}
