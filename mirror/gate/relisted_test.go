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

// A provider version that one listing lacked (the origin answering a
// short list for a while) keeps the dating it had once listed again, as
// the listing rule says (the listing before the one that *first* listed
// it): 1.1.0, of the first listing and served, is not taken for a
// version published at the short listing and held for the whole minimum
// release age. 1.2.0, first listed after the first listing, lacked by
// the short listing and listed again, keeps the time of the listing
// before the one that first listed it.
func TestReleaseAgeRelistedVersionKeepsItsDating(t *testing.T) {
	t.Parallel()
	start := time.Now().Truncate(time.Second).Add(30 * day)
	h, clock := releaseHarnessAt(t, start, map[string]time.Duration{"1.0.0": 400 * day, "1.1.0": 365 * day}, harness.Config{VersionsTTL: time.Minute})
	ctx := context.Background()
	h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	if got := h.Listed(); !slices.Equal(got, []string{"1.0.0", "1.1.0"}) {
		t.Fatalf("first listing %v", got)
	}
	if got := h.Read(ctx, "1.1.0", "linux_amd64"); got.Err != nil {
		t.Fatalf("archive of 1.1.0: %v", got.Err)
	}
	clock.Add(time.Hour)
	h.Origin.AddProvider(harness.NS, harness.Type, []string{"1.2.0"}, []string{"linux_amd64"})
	h.Origin.SetSignedAt(harness.NS, harness.Type, "1.2.0", start.Add(-365*day))
	firstListed := clock.Now() // 1.2.0 is dated by the listing before: start
	if got := h.Listed(); !slices.Equal(got, []string{"1.0.0", "1.1.0"}) {
		t.Fatalf("second listing %v, want 1.2.0 held", got)
	}

	// The origin's short answer.
	h.Origin.RemoveVersion(harness.NS, harness.Type, "1.1.0")
	h.Origin.RemoveVersion(harness.NS, harness.Type, "1.2.0")
	clock.Add(time.Hour)
	if got := h.Listed(); !slices.Equal(got, []string{"1.0.0"}) {
		t.Fatalf("short listing %v", got)
	}

	h.Origin.AddProvider(harness.NS, harness.Type, []string{"1.1.0", "1.2.0"}, []string{"linux_amd64"})
	h.Origin.SetSignedAt(harness.NS, harness.Type, "1.1.0", start.Add(-365*day))
	h.Origin.SetSignedAt(harness.NS, harness.Type, "1.2.0", start.Add(-365*day))
	clock.Add(time.Hour)
	if got := h.Listed(); !slices.Equal(got, []string{"1.0.0", "1.1.0"}) {
		t.Errorf("listed again %v, want 1.0.0 and 1.1.0 (of the first listing), 1.2.0 held", got)
	}
	if got := h.Read(ctx, "1.1.0", "linux_amd64"); got.Err != nil {
		t.Errorf("archive of 1.1.0, of the first listing, listed again: %v", got.Err)
	}
	_, err := h.Packages("1.2.0")
	var perr *gate.PolicyError
	if want := start.Add(72 * time.Hour); !errors.As(err, &perr) || !perr.Verdict.AvailableAt.Equal(want) {
		t.Errorf("package metadata of 1.2.0, first listed at %v: %v, want held until %v", firstListed, err, want)
	}
}

// A module version of the first listing (dated by no signature: the
// listing rule is a module's only date) that one listing lacked keeps
// its dating once listed again, whichever way the origin spells it
// either time: it is not held for the minimum release age as if
// published at the short listing, nor while that listing stands.
func TestModuleReleaseAgeRelistedVersionKeepsItsDating(t *testing.T) {
	t.Parallel()
	for _, sp := range []struct{ first, again string }{{"1.1.0", "1.1.0"}, {"v1.1.0", "1.1.0"}, {"1.1.0", "v1.1.0"}} {
		t.Run(sp.first+" then "+sp.again, func(t *testing.T) {
			t.Parallel()
			clock := enginetest.NewFakeClock()
			clock.Set(time.Now().Truncate(time.Second).Add(30 * day))
			h := harness.New(t, harness.Options{Config: harness.Config{Now: clock.Now, VersionsTTL: time.Minute}})
			h.Origin.AddTarball("vpc.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc\n")}))
			m := harness.Module
			for _, v := range []string{"1.0.0", sp.first} {
				h.Origin.AddModule(m.Namespace, m.Name, m.System, v, h.Origin.TarballURL("vpc.tar.gz"))
			}
			ctx := context.Background()
			mods := h.Engine.Modules()
			h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
			if _, err := mods.ModuleLocation(ctx, m, enginetest.MustModuleVersion(t, "1.1.0")); err != nil {
				t.Fatalf("1.1.0, in the first listing: %v", err)
			}
			h.Origin.RemoveModule(m.Namespace, m.Name, m.System, sp.first)
			clock.Add(time.Hour)
			if _, _, err := mods.ModuleVersions(ctx, m); err != nil {
				t.Fatal(err)
			}
			if v := h.Engine.Inventory().StoredVerdict(ctx, policy.Module, m.String(), "1.1.0"); !v.Allowed {
				t.Errorf("the verdict on the stored 1.1.0 while a listing lacks it: %+v, want allowed", v)
			}
			h.Origin.AddModule(m.Namespace, m.Name, m.System, sp.again, h.Origin.TarballURL("vpc.tar.gz"))
			clock.Add(time.Hour)
			list, _, err := mods.ModuleVersions(ctx, m)
			if err != nil || len(list.Versions) != 2 {
				t.Errorf("listed again %v, %v; want 1.0.0 and 1.1.0", list, err)
			}
			if _, err := mods.ModuleLocation(ctx, m, enginetest.MustModuleVersion(t, "1.1.0")); err != nil {
				t.Errorf("1.1.0, of the first listing, listed again: %v", err)
			}
		})
	}
}

// Two replicas sharing a tier: replica b's listing is the origin's short
// answer, which lacks 1.1.0 of replica a's first listing; a, listing
// again once the origin lists it again, takes b's listing as the one
// before its own. 1.1.0 keeps its dating (the bootstrap) on both, not
// taken for a version published at b's listing.
func TestModuleReleaseAgeRelistedAcrossReplicas(t *testing.T) {
	t.Parallel()
	clock := enginetest.NewFakeClock()
	clock.Set(time.Now().Truncate(time.Second).Add(30 * day))
	tier := harness.NewMemTier()
	cfg := harness.Config{Now: clock.Now, VersionsTTL: time.Minute, Shared: tier}
	a := harness.New(t, harness.Options{Config: cfg})
	b := &harness.Harness{T: t, Origin: a.Origin}
	b.Start(harness.Options{Config: cfg})
	m := harness.Module
	a.Origin.AddTarball("vpc.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc\n")}))
	for _, v := range []string{"1.0.0", "1.1.0"} {
		a.Origin.AddModule(m.Namespace, m.Name, m.System, v, a.Origin.TarballURL("vpc.tar.gz"))
	}
	ctx := context.Background()
	list := func(h *harness.Harness) {
		t.Helper()
		clock.Add(time.Hour)
		if _, _, err := h.Engine.Modules().ModuleVersions(ctx, m); err != nil {
			t.Fatal(err)
		}
		h.WaitIdle()
	}
	list(a)
	a.Origin.RemoveModule(m.Namespace, m.Name, m.System, "1.1.0")
	list(b)
	a.Origin.AddModule(m.Namespace, m.Name, m.System, "1.1.0", a.Origin.TarballURL("vpc.tar.gz"))
	list(a)
	list(b)
	pol := enginetest.DecodePolicy(t, `minimum_release_age = "72h"`)
	for name, h := range map[string]*harness.Harness{"a": a, "b": b} {
		h.Engine.SetPolicy(pol)
		if _, err := h.Engine.Modules().ModuleLocation(ctx, m, enginetest.MustModuleVersion(t, "1.1.0")); err != nil {
			t.Errorf("replica %s: 1.1.0, of the first listing, listed again: %v", name, err)
		}
	}
}

// A listing taken while the clock was far ahead (set a month forward,
// then back) dates the versions the next listing adds no later than that
// listing's own time: they are held for the minimum release age from
// then, not for as long as the clock had been ahead besides.
func TestModuleReleaseAgeListingAheadOfTheClock(t *testing.T) {
	t.Parallel()
	clock := enginetest.NewFakeClock()
	start := time.Now().Truncate(time.Second).Add(30 * day)
	clock.Set(start.Add(30 * day))
	h := harness.New(t, harness.Options{Config: harness.Config{Now: clock.Now, VersionsTTL: time.Minute}})
	h.Origin.AddTarball("vpc.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc\n")}))
	m := harness.Module
	h.Origin.AddModule(m.Namespace, m.Name, m.System, "1.0.0", h.Origin.TarballURL("vpc.tar.gz"))
	ctx := context.Background()
	mods := h.Engine.Modules()
	if _, _, err := mods.ModuleVersions(ctx, m); err != nil {
		t.Fatal(err)
	}
	clock.Set(start)
	h.Origin.AddModule(m.Namespace, m.Name, m.System, "1.1.0", h.Origin.TarballURL("vpc.tar.gz"))
	clock.Add(time.Minute)
	if _, _, err := mods.ModuleVersions(ctx, m); err != nil {
		t.Fatal(err)
	}
	listed := clock.Now()
	h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	_, err := mods.ModuleLocation(ctx, m, enginetest.MustModuleVersion(t, "1.1.0"))
	var perr *gate.PolicyError
	if want := listed.Add(72 * time.Hour); !errors.As(err, &perr) || perr.Verdict.Rule != policy.RuleMinReleaseAge || perr.Verdict.AvailableAt.After(want) {
		t.Errorf("1.1.0, first listed at %v after a listing dated a month ahead: %v, want held until %v at the latest", listed, err, want)
	}
	clock.Set(listed.Add(72 * time.Hour))
	if _, err := mods.ModuleLocation(ctx, m, enginetest.MustModuleVersion(t, "1.1.0")); err != nil {
		t.Errorf("1.1.0, 72h after it was first listed: %v", err)
	}
}
