package mirror

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// An origin that stalls on the refresh of a version list the cache holds
// (past its time to live) does not hold the request up until it answers:
// the cached list is served, stale, after StaleAfter, well within the 10
// seconds a client waits for a JSON answer, while the refresh goes on;
// the request after it ended gets what the refresh fetched, without
// asking the origin again. A list the cache does not hold is waited for.
func TestSlowOriginServesCachedListSoon(t *testing.T) {
	t.Parallel()
	h, clock := listedBeforeNewVersion(t, time.Minute)
	ctx := t.Context()
	h.origin.SetLatency(time.Second) // far longer than StaleAfter
	clock.Add(2 * time.Minute)       // the list is past its time to live
	list, st, err := h.engine.Versions(ctx, h.provider())
	if err != nil {
		t.Fatalf("with the origin slow and a list cached: %v", err)
	}
	if !st.Stale || !slices.Equal(list.Names(), []string{"1.0.0"}) {
		t.Errorf("answered %v (stale %v), want the cached list, stale, before the origin answered", list.Names(), st.Stale)
	}

	if err := WaitIdle(ctx, h.engine); err != nil { // the refresh goes on, and ends
		t.Fatal(err)
	}
	h.origin.SetLatency(0)
	// The cache dates what it stores by the real clock: back to it, the
	// list just stored is fresh.
	clock.Set(time.Now())
	asked := h.origin.Hits(fakeorigin.Versions)
	list, st, err = h.engine.Versions(ctx, h.provider())
	if err != nil || st.Stale || !slices.Equal(list.Names(), []string{"1.0.0", "1.1.0"}) {
		t.Errorf("after the refresh: %v (stale %v), %v; want what it fetched", list.Names(), st.Stale, err)
	}
	if n := h.origin.Hits(fakeorigin.Versions); n != asked {
		t.Errorf("the origin was asked %d more times, want none", n-asked)
	}

	// A provider never listed has nothing to serve instead: it waits.
	h.origin.AddProvider(ns, "other", []string{"2.0.0"}, []string{"linux_amd64"})
	h.origin.SetLatency(200 * time.Millisecond)
	p := h.provider()
	p.Type = "other"
	if list, _, err := h.engine.Versions(ctx, p); err != nil || !slices.Equal(list.Names(), []string{"2.0.0"}) {
		t.Errorf("a list not cached, the origin slow: %v, %v; want the origin's answer", list, err)
	}
}

// A module's version list the cache holds is served the same way when
// its origin stalls: stale after StaleAfter, the refresh going on.
func TestSlowOriginServesCachedModuleListSoon(t *testing.T) {
	t.Parallel()
	clock := enginetest.NewFakeClock()
	clock.Set(time.Now())
	h := newHarness(t, harnessOptions{cfg: Config{Now: clock.Now, VersionsTTL: time.Minute, StaleAfter: 50 * time.Millisecond}})
	h.origin.AddTarball("vpc.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc\n")}))
	h.origin.AddModule("acme", "vpc", "aws", "1.0.0", h.origin.TarballURL("vpc.tar.gz"))
	m := addrs.Module{Hostname: originHost, Namespace: "acme", Name: "vpc", System: "aws"}
	ctx := t.Context()
	mods := h.engine.Modules()
	if _, _, err := mods.ModuleVersions(ctx, m); err != nil {
		t.Fatal(err)
	}

	h.origin.AddModule("acme", "vpc", "aws", "1.1.0", h.origin.TarballURL("vpc.tar.gz"))
	h.origin.SetLatency(time.Second)
	clock.Add(2 * time.Minute)
	list, st, err := mods.ModuleVersions(ctx, m)
	if err != nil || !st.Stale || !slices.Equal(list.Versions, []string{"1.0.0"}) {
		t.Errorf("with the origin slow and a list cached: %+v (stale %v), %v; want the cached list, stale", list, st.Stale, err)
	}
	if err := WaitIdle(ctx, h.engine); err != nil {
		t.Fatal(err)
	}
	h.origin.SetLatency(0)
	clock.Set(time.Now())
	if list, st, err := mods.ModuleVersions(ctx, m); err != nil || st.Stale || !slices.Contains(list.Versions, "1.1.0") {
		t.Errorf("after the refresh: %+v (stale %v), %v; want what it fetched", list, st.Stale, err)
	}
}

// A refresh forced because the cached list lacks the version asked for
// (released since it was listed) is waited for, however slow the origin:
// the cached list cannot answer, and serving it stale would fail a
// version the origin lists.
func TestSlowOriginForcedRefreshWaitedFor(t *testing.T) {
	t.Parallel()
	h, clock := listedBeforeNewVersion(t, time.Hour)
	ctx := t.Context()
	clock.Add(2 * time.Minute) // fresh, but old enough to be refreshed for a version it lacks
	h.origin.SetLatency(300 * time.Millisecond)
	pkg, err := h.engine.Package(ctx, h.provider(), mustVersion(t, "1.1.0"), []addrs.Platform{mustPlatform(t, "linux_amd64")})
	if err != nil || len(pkg.Archives) != 1 {
		t.Fatalf("package of a version the origin lists, its list's refresh slow: %+v, %v", pkg, err)
	}
}

// listedBeforeNewVersion is an engine (lists kept for ttl, served stale
// after 50 ms) on a clock of its own that has listed the provider with
// 1.0.0 alone, whose origin has listed 1.1.0 since.
func listedBeforeNewVersion(t *testing.T, ttl time.Duration) (*harness, *enginetest.FakeClock) {
	t.Helper()
	clock := enginetest.NewFakeClock()
	clock.Set(time.Now())
	h := newHarness(t, harnessOptions{cfg: Config{Now: clock.Now, VersionsTTL: ttl, StaleAfter: 50 * time.Millisecond}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
	if _, _, err := h.engine.Versions(t.Context(), h.provider()); err != nil {
		t.Fatal(err)
	}
	h.origin.AddProvider(ns, typ, []string{"1.1.0"}, []string{"linux_amd64"})
	return h, clock
}

// An origin that answers the refresh of a cached list with 404, slowly:
// the request that comes while the refresh is on is served the cached
// list, stale, as for any refresh that has not ended (it may as well be
// failing); once the 404 came, the requests after it are answered not
// found at once, for not_found_ttl, without the cached list and without
// asking the origin; after that period, the origin is asked again.
func TestSlowNotFoundAnsweredOnceKnown(t *testing.T) {
	t.Parallel()
	clock := enginetest.NewFakeClock()
	clock.Set(time.Now())
	h := newHarness(t, harnessOptions{cfg: Config{Now: clock.Now, VersionsTTL: time.Minute, StaleAfter: 50 * time.Millisecond, NotFoundTTL: time.Hour, Metrics: &notFoundMetrics{}}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
	ctx := t.Context()
	if _, _, err := h.engine.Versions(ctx, h.provider()); err != nil {
		t.Fatal(err)
	}

	h.origin.SetKindStatus(fakeorigin.Versions, 404) // the provider is gone from the origin
	h.origin.SetLatency(500 * time.Millisecond)
	clock.Add(2 * time.Minute)
	list, st, err := h.engine.Versions(ctx, h.provider())
	if err != nil || !st.Stale || !slices.Equal(list.Names(), []string{"1.0.0"}) {
		t.Fatalf("while the slow 404 is on its way: %v (stale %v), %v; want the cached list, stale", list.Names(), st.Stale, err)
	}
	if err := WaitIdle(ctx, h.engine); err != nil { // the refresh ends with the 404
		t.Fatal(err)
	}
	asked := h.origin.Hits(fakeorigin.Versions)
	for range 3 {
		start := time.Now()
		list, _, err := h.engine.Versions(ctx, h.provider())
		if !errors.Is(err, discovery.ErrNotFound) {
			t.Fatalf("after the 404: %v, %v; want not found", list, err)
		}
		if d := time.Since(start); d >= 400*time.Millisecond {
			t.Errorf("after the 404: not found in %v, want it at once (the origin takes 500ms)", d)
		}
	}
	if n := h.origin.Hits(fakeorigin.Versions) - asked; n != 0 {
		t.Errorf("the origin was asked %d times after its 404, want none within not_found_ttl", n)
	}

	clock.Add(2 * time.Hour) // the 404 forgotten: the origin is asked again
	h.origin.SetLatency(0)
	list, st, err = h.engine.Versions(ctx, h.provider())
	if err == nil && st.Stale {
		// The origin, loaded, took more than StaleAfter: the cached list
		// was served while the refresh goes on, as above; the request
		// after it ended gets its 404.
		if err := WaitIdle(ctx, h.engine); err != nil {
			t.Fatal(err)
		}
		list, _, err = h.engine.Versions(ctx, h.provider())
	}
	if !errors.Is(err, discovery.ErrNotFound) {
		t.Fatalf("after not_found_ttl: %v, %v; want the origin's not found", list, err)
	}
	if n := h.origin.Hits(fakeorigin.Versions) - asked; n != 1 {
		t.Errorf("after not_found_ttl the origin was asked %d times, want 1", n)
	}
}
