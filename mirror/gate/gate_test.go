package gate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// releaseHarness is an engine on a fake clock, in front of an origin
// whose test provider has the versions given, each signed at the time
// given (relative to the clock's start).
func releaseHarness(t *testing.T, signed map[string]time.Duration, cfg harness.Config) (*harness.Harness, *enginetest.FakeClock) {
	t.Helper()
	return releaseHarnessAt(t, time.Now().Truncate(time.Second), signed, cfg)
}

// releaseHarnessAt is releaseHarness with the clock starting at start.
// The cache dates what it stores by the real clock, which decides when a
// version list expires: a clock ahead of it makes lists expire when the
// test's clock says.
func releaseHarnessAt(t *testing.T, start time.Time, signed map[string]time.Duration, cfg harness.Config) (*harness.Harness, *enginetest.FakeClock) {
	t.Helper()
	clock := enginetest.NewFakeClock()
	clock.Set(start)
	cfg.Now = clock.Now
	h := harness.New(t, harness.Options{Config: cfg})
	var vs []string
	for v := range signed {
		vs = append(vs, v)
	}
	slices.Sort(vs)
	h.Origin.AddProvider(harness.NS, harness.Type, vs, []string{"linux_amd64"})
	for v, ago := range signed {
		h.Origin.SetSignedAt(harness.NS, harness.Type, v, clock.Now().Add(-ago))
	}
	return h, clock
}

const day = 24 * time.Hour

// With a minimum release age of 72h, a version signed an hour ago is
// not listed and its archive is refused with the time it becomes
// available; an exemption for it makes it installable at once; 72h later
// it is listed without one.
func TestMinimumReleaseAgeHoldsFreshSignature(t *testing.T) {
	t.Parallel()
	h, clock := releaseHarness(t, map[string]time.Duration{"1.0.0": 365 * day, "1.1.0": time.Hour}, harness.Config{})
	signed := clock.Now().Add(-time.Hour)
	h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))

	if got := h.Listed(); !slices.Equal(got, []string{"1.0.0"}) {
		t.Fatalf("listed %v, want only 1.0.0", got)
	}
	got := h.Read(context.Background(), "1.1.0", "linux_amd64")
	var perr *gate.PolicyError
	if !errors.As(got.Err, &perr) || !errors.Is(got.Err, gate.ErrPolicy) {
		t.Fatalf("archive of the fresh version: %v, want a *gate.PolicyError", got.Err)
	}
	if want := signed.Add(72 * time.Hour); !perr.Verdict.AvailableAt.Equal(want) || perr.Verdict.Rule != policy.RuleMinReleaseAge {
		t.Fatalf("refused by %s until %v, want %s until %v", perr.Verdict.Rule, perr.Verdict.AvailableAt, policy.RuleMinReleaseAge, want)
	}
	if !strings.Contains(got.Err.Error(), signed.Add(72*time.Hour).UTC().Format(time.RFC3339)) {
		t.Fatalf("the refusal does not say when: %v", got.Err)
	}
	if _, err := h.Packages("1.1.0"); !errors.Is(err, gate.ErrPolicy) {
		t.Fatalf("package metadata of the fresh version: %v, want a policy refusal", err)
	}
	held := h.Engine.Withheld()
	if len(held) != 1 || held[0].Version != "1.1.0" || held[0].Rule != policy.RuleMinReleaseAge || !held[0].AvailableAt.Equal(signed.Add(72*time.Hour)) {
		t.Fatalf("held back %+v, want 1.1.0 until %v", held, signed.Add(72*time.Hour))
	}

	h.Engine.SetPolicy(enginetest.DecodePolicy(t, `
minimum_release_age = "72h"
release_age_exempt_version "`+h.Provider().String()+`" {
  versions = "= 1.1.0"
  reason   = "urgent fix"
}`))
	if got := h.Listed(); !slices.Equal(got, []string{"1.0.0", "1.1.0"}) {
		t.Fatalf("listed %v with the exemption, want both", got)
	}
	if got := h.Read(context.Background(), "1.1.0", "linux_amd64"); got.Err != nil || len(got.Body) == 0 {
		t.Fatalf("archive with the exemption: %v", got.Err)
	}
	if held := h.Engine.Withheld(); len(held) != 0 {
		t.Fatalf("held back %+v with the exemption, want none", held)
	}

	h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	if got := h.Listed(); !slices.Equal(got, []string{"1.0.0"}) {
		t.Fatalf("listed %v without the exemption again, want only 1.0.0", got)
	}
	clock.Add(72 * time.Hour)
	if got := h.Listed(); !slices.Equal(got, []string{"1.0.0", "1.1.0"}) {
		t.Fatalf("listed %v 72h later, want both", got)
	}
}

// A version signed a year ago that a listing an hour ago did not have
// is held until 72h after that listing; one that a listing a month ago
// did not have is not held.
func TestMinimumReleaseAgeListingRule(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		listedAt time.Duration // before now, the listing without the version
		heldFor  time.Duration // 0: not held
	}{
		{"missing an hour ago", time.Hour, 71 * time.Hour},
		{"missing a month ago", 30 * day, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now().Truncate(time.Second).Add(tc.listedAt + time.Hour)
			h, clock := releaseHarnessAt(t, start, map[string]time.Duration{"1.0.0": 400 * day, "1.1.0": 365 * day}, harness.Config{VersionsTTL: time.Minute})
			h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
			now := clock.Now()
			h.Origin.RemoveVersion(harness.NS, harness.Type, "1.1.0")
			clock.Set(now.Add(-tc.listedAt))
			if got := h.Listed(); !slices.Equal(got, []string{"1.0.0"}) {
				t.Fatalf("first listing %v", got)
			}
			h.Origin.AddProvider(harness.NS, harness.Type, []string{"1.1.0"}, []string{"linux_amd64"})
			h.Origin.SetSignedAt(harness.NS, harness.Type, "1.1.0", now.Add(-365*day))
			clock.Set(now)
			got := h.Listed()
			if tc.heldFor == 0 {
				if !slices.Equal(got, []string{"1.0.0", "1.1.0"}) {
					t.Fatalf("listed %v, want both", got)
				}
				return
			}
			if !slices.Equal(got, []string{"1.0.0"}) {
				t.Fatalf("listed %v, want 1.1.0 held", got)
			}
			_, err := h.Packages("1.1.0")
			var perr *gate.PolicyError
			if !errors.As(err, &perr) || !perr.Verdict.AvailableAt.Equal(now.Add(tc.heldFor)) {
				t.Fatalf("package metadata: %v, want held until %v", err, now.Add(tc.heldFor))
			}
			clock.Set(now.Add(tc.heldFor))
			if got := h.Listed(); !slices.Equal(got, []string{"1.0.0", "1.1.0"}) {
				t.Fatalf("listed %v when available, want both", got)
			}
		})
	}
}

// The first listing of a provider with 300 versions in 6 major lines,
// on a cache holding records written before evidence was kept, costs at
// most 3 origin requests per major line; a second listing none; a new
// version its own 3.
func TestReleaseTimesCost(t *testing.T) {
	t.Parallel()
	signed := map[string]time.Duration{}
	var newest []string
	for major := 1; major <= 6; major++ {
		for minor := range 50 {
			signed[fmt.Sprintf("%d.%d.0", major, minor)] = 365*day + time.Duration(300-major*50-minor)*time.Hour
		}
		newest = append(newest, fmt.Sprintf("%d.49.0", major))
	}
	h, clock := releaseHarness(t, signed, harness.Config{VersionsTTL: time.Minute})
	p := h.Provider()
	for _, v := range newest {
		old := fmt.Sprintf(`{"schema":1,"version":%q,"sums":{},"archives":{},"verified_at":"2025-06-01T12:00:00Z"}`, v)
		if err := h.Store.PutMeta(records.PackageKey(p, harness.MustVersion(t, v)), json.RawMessage(old)); err != nil {
			t.Fatal(err)
		}
	}
	h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	extra := func() int {
		return h.Origin.Hits(fakeorigin.Download) + h.Origin.Hits(fakeorigin.Shasums) + h.Origin.Hits(fakeorigin.Signature)
	}
	h.Origin.ResetHits()
	if got := h.Listed(); len(got) != 300 {
		t.Fatalf("listed %d versions, want 300", len(got))
	}
	if n := extra(); n > 18 {
		t.Fatalf("first listing made %d extra origin requests, want at most 18", n)
	}

	clock.Add(2 * time.Minute) // the list expired: listed again
	h.Origin.ResetHits()
	if got := h.Listed(); len(got) != 300 {
		t.Fatalf("listed %d versions, want 300", len(got))
	}
	if h.Origin.Hits(fakeorigin.Versions) != 1 {
		t.Fatalf("the list was not fetched again")
	}
	if n := extra(); n != 0 {
		t.Fatalf("second listing made %d extra origin requests, want none", n)
	}

	h.Origin.AddProvider(harness.NS, harness.Type, []string{"6.50.0"}, []string{"linux_amd64"})
	h.Origin.SetSignedAt(harness.NS, harness.Type, "6.50.0", clock.Now().Add(-day))
	clock.Add(2 * time.Minute)
	h.Origin.ResetHits()
	got := h.Listed()
	if n := extra(); n != 3 {
		t.Fatalf("a new version cost %d extra origin requests, want 3", n)
	}
	if len(got) != 300 || slices.Contains(got, "6.50.0") {
		t.Fatalf("listed %d versions with 6.50.0 %v, want it held (signed a day ago)", len(got), slices.Contains(got, "6.50.0"))
	}
}

// Release times never change once learned, and are kept in the cache:
// an engine started again on it asks the origin for none of them.
func TestReleaseTimesKept(t *testing.T) {
	t.Parallel()
	clock := enginetest.NewFakeClock()
	clock.Set(time.Now().Truncate(time.Second))
	dir := t.TempDir()
	h := harness.New(t, harness.Options{Config: harness.Config{Now: clock.Now}, CacheDir: dir})
	h.Origin.AddProvider(harness.NS, harness.Type, []string{"1.0.0", "2.0.0"}, []string{"linux_amd64"})
	h.Origin.SetSignedAt(harness.NS, harness.Type, "1.0.0", clock.Now().Add(-365*day))
	h.Origin.SetSignedAt(harness.NS, harness.Type, "2.0.0", clock.Now().Add(-365*day))
	h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	if got := h.Listed(); len(got) != 2 {
		t.Fatalf("listed %v", got)
	}
	h.Stop()
	h.Start(harness.Options{Config: harness.Config{Now: clock.Now, VersionsTTL: time.Minute}, CacheDir: dir})
	h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	clock.Add(2 * time.Minute)
	// Signed again now: a time read again would hold them.
	h.Origin.SetSignedAt(harness.NS, harness.Type, "1.0.0", time.Time{})
	h.Origin.SetSignedAt(harness.NS, harness.Type, "2.0.0", time.Time{})
	h.Origin.ResetHits()
	if got := h.Listed(); len(got) != 2 {
		t.Fatalf("listed %v after a restart, want both", got)
	}
	if n := h.Origin.Hits(fakeorigin.Signature); n != 0 {
		t.Fatalf("%d signatures fetched after a restart, want none", n)
	}
}

// The deny and allow rules and denied versions: a provider outside the
// allow list is neither listed nor served; a denied version is left out
// of the list with its reason, and its package refused naming the rule
// and the reason; a nil policy allows everything again.
func TestPolicyDenies(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{})
	h.Origin.AddProvider(harness.NS, harness.Type, []string{"1.0.0", "1.0.1", "1.1.0"}, []string{"linux_amd64"})
	h.Origin.AddProvider("other", "thing", []string{"1.0.0"}, []string{"linux_amd64"})
	h.Engine.SetPolicy(enginetest.DecodePolicy(t, fmt.Sprintf(`
allow = ["%[1]s/%[2]s/*"]
deny_version "%[1]s/%[2]s/%[3]s" {
  versions = "= 1.0.1"
  reason   = "CVE-2026-1234: use 1.1.0"
}`, harness.OriginHost, harness.NS, harness.Type)))
	list, _, err := h.Engine.Versions(context.Background(), h.Provider())
	if err != nil {
		t.Fatal(err)
	}
	if got := list.Names(); !slices.Equal(got, []string{"1.0.0", "1.1.0"}) {
		t.Fatalf("listed %v, want 1.0.1 left out", got)
	}
	if len(list.Held) != 1 || !strings.Contains(list.Held[0], "CVE-2026-1234: use 1.1.0") {
		t.Fatalf("held notes %q, want the reason", list.Held)
	}
	_, err = h.Packages("1.0.1")
	var perr *gate.PolicyError
	if !errors.As(err, &perr) || perr.Verdict.Rule != policy.RuleDenyVersion || !strings.Contains(err.Error(), "CVE-2026-1234") {
		t.Fatalf("denied version: %v, want a deny_version refusal with the reason", err)
	}
	other := addrs.Provider{Hostname: harness.OriginHost, Namespace: "other", Type: "thing"}
	if _, _, err := h.Engine.Versions(context.Background(), other); !errors.As(err, &perr) || perr.Verdict.Rule != policy.RuleAllowList {
		t.Fatalf("provider outside the allow list: %v, want an allow_list refusal", err)
	}
	if _, err := h.Engine.OpenArchive(context.Background(), other, harness.MustVersion(t, "1.0.0"), harness.MustPlatform(t, "linux_amd64")); !errors.Is(err, gate.ErrPolicy) {
		t.Fatalf("archive of a provider outside the allow list: %v", err)
	}
	if h.Origin.Hits(fakeorigin.Archive) != 0 {
		t.Fatalf("a refused archive was fetched")
	}
	h.Engine.SetPolicy(nil)
	if got := h.Listed(); len(got) != 3 {
		t.Fatalf("listed %v with no policy, want all three", got)
	}
}

// A warm answer kept for reuse ends right after SetPolicy, and when the
// clock reaches the time a held version becomes available.
func TestPolicyEndsReuse(t *testing.T) {
	t.Parallel()
	h, clock := releaseHarness(t, map[string]time.Duration{"1.0.0": 365 * day, "1.1.0": time.Hour}, harness.Config{VersionsTTL: 1000 * time.Hour})
	h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	h.Listed()
	_, st, err := h.Engine.Versions(context.Background(), h.Provider())
	if err != nil {
		t.Fatal(err)
	}
	if !h.Engine.Reuse(st.Stamp) {
		t.Fatal("a cached list is not reusable")
	}
	clock.Add(71*time.Hour - time.Second)
	if !h.Engine.Reuse(st.Stamp) {
		t.Fatal("not reusable before the held version becomes available")
	}
	clock.Add(time.Second)
	if h.Engine.Reuse(st.Stamp) {
		t.Fatal("still reusable once the held version became available")
	}
	_, st, err = h.Engine.Versions(context.Background(), h.Provider())
	if err != nil {
		t.Fatal(err)
	}
	if !h.Engine.Reuse(st.Stamp) {
		t.Fatal("a cached list is not reusable")
	}
	h.Engine.SetPolicy(enginetest.DecodePolicy(t, `deny = ["`+h.Provider().String()+`"]`))
	if h.Engine.Reuse(st.Stamp) {
		t.Fatal("still reusable after SetPolicy")
	}
}

// A module version first listed an hour ago is held by a minimum release
// age of 72h however the client spells it ("1.1.0", "v1.1.0") and
// however the origin does ("v1.1.0" here): the release time is keyed by
// the canonical version. A version of the first listing ever taken
// passes (the bootstrap), and one no listing named is held: a release
// time not known is never taken as long ago.
func TestModuleReleaseAgeEverySpelling(t *testing.T) {
	t.Parallel()
	for _, originSpelling := range []string{"1.1.0", "v1.1.0"} {
		t.Run("origin "+originSpelling, func(t *testing.T) {
			t.Parallel()
			clock := enginetest.NewFakeClock()
			clock.Set(time.Now().Truncate(time.Second).Add(30 * day))
			h := harness.New(t, harness.Options{Config: harness.Config{Now: clock.Now, VersionsTTL: time.Minute}})
			h.Origin.AddTarball("vpc.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc\n")}))
			h.Origin.AddModule(harness.Module.Namespace, harness.Module.Name, harness.Module.System, "1.0.0", h.Origin.TarballURL("vpc.tar.gz"))
			ctx := context.Background()
			mods := h.Engine.Modules()
			if _, _, err := mods.ModuleVersions(ctx, harness.Module); err != nil {
				t.Fatal(err)
			}
			h.Origin.AddModule(harness.Module.Namespace, harness.Module.Name, harness.Module.System, originSpelling, h.Origin.TarballURL("vpc.tar.gz"))
			clock.Set(clock.Now().Add(time.Hour))
			if _, _, err := mods.ModuleVersions(ctx, harness.Module); err != nil {
				t.Fatal(err)
			}
			h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
			for _, asked := range []string{"1.1.0", "v1.1.0"} {
				_, err := mods.ModuleLocation(ctx, harness.Module, enginetest.MustModuleVersion(t, asked))
				var perr *gate.PolicyError
				if !errors.As(err, &perr) || perr.Verdict.Rule != policy.RuleMinReleaseAge || perr.Version != "1.1.0" {
					t.Errorf("module location of %s: %v, want held by its minimum release age", asked, err)
				}
			}
			for _, asked := range []string{"1.0.0", "v1.0.0"} {
				if _, err := mods.ModuleLocation(ctx, harness.Module, enginetest.MustModuleVersion(t, asked)); err != nil {
					t.Errorf("module location of %s, in the first listing: %v", asked, err)
				}
			}
			list, _, err := mods.ModuleVersions(ctx, harness.Module)
			if err != nil || len(list.Versions) != 1 || enginetest.MustModuleVersion(t, list.Versions[0]).String() != "1.0.0" {
				t.Errorf("listed %v, %v; want 1.0.0 alone", list, err)
			}
			for _, asked := range []string{"1.1.0", "v1.1.0"} {
				if v := h.Engine.Inventory().StoredVerdict(ctx, policy.Module, harness.Module.String(), asked); v.Allowed {
					t.Errorf("the verdict on the stored %s (export, retention): allowed, want held", asked)
				}
			}
			// A version no listing named has no release time known: held.
			_, err = mods.ModuleLocation(ctx, harness.Module, enginetest.MustModuleVersion(t, "1.2.0"))
			var perr *gate.PolicyError
			if !errors.As(err, &perr) || perr.Verdict.Rule != policy.RuleMinReleaseAge {
				t.Errorf("module location of a version never listed: %v, want held by its minimum release age", err)
			}
		})
	}
}

// Two replicas sharing a tier, a minimum release age of 72h: a module
// version that replica b saw first (its listing dated it by a's earlier
// one) is held on replica a too, whose own listing then takes b's
// listing, which names the version, as the one before; and on replica c,
// started later with an empty cache. Taken as a version of a first
// listing (the bootstrap), it would pass at once on a and c: the tier
// would have made its release time "long ago".
func TestModuleReleaseAgeAcrossReplicas(t *testing.T) {
	t.Parallel()
	clock := enginetest.NewFakeClock()
	clock.Set(time.Now().Truncate(time.Second).Add(30 * day))
	tier := harness.NewMemTier()
	cfg := harness.Config{Now: clock.Now, VersionsTTL: time.Minute, Shared: tier}
	a := harness.New(t, harness.Options{Config: cfg})
	b := &harness.Harness{T: t, Origin: a.Origin}
	b.Start(harness.Options{Config: cfg})
	a.Origin.AddTarball("vpc.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc\n")}))
	a.Origin.AddModule(harness.Module.Namespace, harness.Module.Name, harness.Module.System, "1.0.0", a.Origin.TarballURL("vpc.tar.gz"))
	ctx := context.Background()
	if _, _, err := a.Engine.Modules().ModuleVersions(ctx, harness.Module); err != nil {
		t.Fatal(err)
	}
	a.WaitIdle()

	a.Origin.AddModule(harness.Module.Namespace, harness.Module.Name, harness.Module.System, "1.1.0", a.Origin.TarballURL("vpc.tar.gz"))
	clock.Set(clock.Now().Add(time.Hour))
	if _, _, err := b.Engine.Modules().ModuleVersions(ctx, harness.Module); err != nil {
		t.Fatal(err)
	}
	b.WaitIdle()
	clock.Set(clock.Now().Add(time.Hour))
	if _, _, err := a.Engine.Modules().ModuleVersions(ctx, harness.Module); err != nil {
		t.Fatal(err)
	}
	a.WaitIdle()
	// A replica started now, with an empty cache, lists the tier's
	// listing as the one before its own.
	c := &harness.Harness{T: t, Origin: a.Origin}
	c.Start(harness.Options{Config: cfg})
	if _, _, err := c.Engine.Modules().ModuleVersions(ctx, harness.Module); err != nil {
		t.Fatal(err)
	}
	c.WaitIdle()

	pol := enginetest.DecodePolicy(t, `minimum_release_age = "72h"`)
	for name, h := range map[string]*harness.Harness{"a": a, "b": b, "c": c} {
		h.Engine.SetPolicy(pol)
		_, err := h.Engine.Modules().ModuleLocation(ctx, harness.Module, enginetest.MustModuleVersion(t, "1.1.0"))
		var perr *gate.PolicyError
		if !errors.As(err, &perr) || perr.Verdict.Rule != policy.RuleMinReleaseAge {
			t.Errorf("replica %s: module location of 1.1.0, listed first two hours ago: %v, want held by its minimum release age", name, err)
		}
		if _, err := h.Engine.Modules().ModuleLocation(ctx, harness.Module, enginetest.MustModuleVersion(t, "1.0.0")); err != nil {
			t.Errorf("replica %s: module location of 1.0.0, in the first listing: %v", name, err)
		}
	}
}

// A client asking for made-up providers under an allow list has each
// refused (before any origin request: the policy layer asks the address
// rules first, mirror/served); the refusals are counted and kept
// for the status page, but at most a burst of them, then one a second,
// are logged at warn: the rest go to debug, and the next warning says
// how many did.
func TestRefusalWarningsBounded(t *testing.T) {
	t.Parallel()
	var logs strings.Builder
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	clock := enginetest.NewFakeClock()
	clock.Set(time.Now().Truncate(time.Second))
	h := harness.New(t, harness.Options{Config: harness.Config{Logger: logger, Now: clock.Now}})
	h.Engine.SetPolicy(enginetest.DecodePolicy(t, fmt.Sprintf(`allow = ["%s/%s/*"]`, harness.OriginHost, harness.NS)))
	refuse := func(n int, from int) {
		for i := from; i < from+n; i++ {
			p := addrs.Provider{Hostname: harness.OriginHost, Namespace: fmt.Sprintf("made-up-%d", i), Type: "x"}
			if err := h.Engine.CheckAddress(policy.Provider, p.String()); !errors.Is(err, gate.ErrPolicy) {
				t.Fatalf("%s: %v, want a policy refusal", p, err)
			}
		}
	}
	count := func(level string) int {
		return strings.Count(logs.String(), "level="+level+` msg="held back by the package policy"`)
	}
	refuse(500, 0)
	if w, d := count("WARN"), count("DEBUG"); w != 20 || d != 480 {
		t.Fatalf("500 made-up names refused at once: %d warnings and %d at debug, want 20 and 480", w, d)
	}
	clock.Add(3 * time.Second)
	refuse(5, 500)
	if w := count("WARN"); w != 23 {
		t.Fatalf("three seconds later, %d warnings in all, want 23", w)
	}
	if !strings.Contains(logs.String(), "refusals_logged_at_debug=480") {
		t.Fatalf("the next warning does not say how many went to debug:\n%s", logs.String()[len(logs.String())-2000:])
	}
	if got := len(h.Engine.Withheld()); got != 505 {
		t.Fatalf("%d refusals remembered for the status page, want all 505", got)
	}
}

// Refusals (the status page's list of what the policy holds back) gives
// its last answer again while it holds, and a new one as soon as it may
// not: something refused since, while the memory of refusals is small;
// the clock past a held version's time; a policy put in force. While the
// memory holds refusalsFloorEntries or more (names a client made up, a
// refusal each), a refusal since is shown within a second.
func TestRefusalsKeptWhileTheyHold(t *testing.T) {
	t.Parallel()
	h, clock := releaseHarness(t, map[string]time.Duration{"1.0.0": 365 * day, "1.1.0": time.Hour}, harness.Config{})
	src := fmt.Sprintf("minimum_release_age = \"72h\"\nallow = [\"%s/%s/*\"]\n", harness.OriginHost, harness.NS)
	h.Engine.SetPolicy(enginetest.DecodePolicy(t, src))
	refuse := func(from, n int) {
		for i := from; i < from+n; i++ {
			p := addrs.Provider{Hostname: harness.OriginHost, Namespace: fmt.Sprintf("made-up-%d", i), Type: "x"}
			if err := h.Engine.CheckAddress(policy.Provider, p.String()); !errors.Is(err, gate.ErrPolicy) {
				t.Fatalf("%s: %v, want a policy refusal", p, err)
			}
		}
	}
	held := func() (versions, addresses int) {
		for _, w := range h.Engine.Withheld() {
			if w.Version == "" {
				addresses++
			} else {
				versions++
			}
		}
		return versions, addresses
	}
	if got := h.Listed(); !slices.Equal(got, []string{"1.0.0"}) {
		t.Fatalf("listed %v, want only 1.0.0", got)
	}
	if v, a := held(); v != 1 || a != 0 {
		t.Fatalf("held back %d versions and %d addresses, want 1.1.0 alone", v, a)
	}
	refuse(0, 1)
	if v, a := held(); v != 1 || a != 1 {
		t.Fatalf("after a refusal, held back %d versions and %d addresses, want 1 and 1", v, a)
	}
	clock.Add(72 * time.Hour)
	if v, a := held(); v != 0 || a != 1 {
		t.Fatalf("72h later, held back %d versions and %d addresses, want 1.1.0 let through", v, a)
	}

	refuse(1, 1100)
	if _, a := held(); a != 1101 {
		t.Fatalf("held back %d addresses, want 1101", a)
	}
	refuse(1101, 1)
	if _, a := held(); a != 1101 {
		t.Fatalf("a refusal within a second of the last answer of 1101: %d addresses, want the answer kept", a)
	}
	h.Engine.SetPolicy(enginetest.DecodePolicy(t, src))
	if _, a := held(); a != 1102 {
		t.Fatalf("with a policy put in force, held back %d addresses, want 1102 at once", a)
	}
	h.Engine.SetPolicy(nil)
	if v, a := held(); v != 0 || a != 0 {
		t.Fatalf("with no policy, held back %d versions and %d addresses", v, a)
	}
}

// The memory of refusals the status page lists is bounded, and full it
// forgets the refusal least recently made, not all of them: a client
// asking for made-up names past the bound does not empty the list of
// what the policy holds back that clients keep asking for.
func TestRefusalsForgetTheLeastRecent(t *testing.T) {
	t.Parallel()
	const bound = 1 << 14 // the memory's, as docs/policy.md states it
	h := harness.New(t, harness.Options{})
	src := fmt.Sprintf(`allow = ["%s/%s/*"]`, harness.OriginHost, harness.NS)
	h.Engine.SetPolicy(enginetest.DecodePolicy(t, src))
	refuse := func(ns string) {
		p := addrs.Provider{Hostname: harness.OriginHost, Namespace: ns, Type: "x"}
		if err := h.Engine.CheckAddress(policy.Provider, p.String()); !errors.Is(err, gate.ErrPolicy) {
			t.Fatalf("%s: %v, want a policy refusal", p, err)
		}
	}
	asked := addrs.Provider{Hostname: harness.OriginHost, Namespace: "asked-for", Type: "x"}.String()
	listed := func() (found bool, n int) {
		// A policy put in force: the list made again at once, not its
		// last answer given again.
		h.Engine.SetPolicy(enginetest.DecodePolicy(t, src))
		for _, w := range h.Engine.Withheld() {
			found = found || w.Provider == asked
			n++
		}
		return found, n
	}
	refuse("asked-for")
	for i := range bound - 1 {
		refuse(fmt.Sprintf("made-up-%d", i))
	}
	if found, n := listed(); !found || n != bound {
		t.Fatalf("at the bound: %d refusals listed (the one asked for: %v), want %d with it", n, found, bound)
	}
	refuse("asked-for") // asked for again
	for i := range bound / 2 {
		refuse(fmt.Sprintf("made-up-more-%d", i))
	}
	found, n := listed()
	if !found {
		t.Errorf("%d made-up names past the bound forgot the refusal asked for again before them", bound/2)
	}
	if n != bound {
		t.Errorf("%d refusals listed past the bound, want %d", n, bound)
	}
}
