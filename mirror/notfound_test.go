package mirror

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// notFoundMetrics counts the answers given from the origins' remembered
// not-founds, and keeps the entries last reported.
type notFoundMetrics struct {
	noMetrics
	remembered atomic.Int64
	entries    atomic.Int64
}

func (m *notFoundMetrics) NotFoundRemembered(string)       { m.remembered.Add(1) }
func (m *notFoundMetrics) NotFoundEntries(_ string, n int) { m.entries.Store(int64(n)) }

// notFoundHarness is an engine remembering its origin's not-founds for
// ttl, on a clock the test moves.
func notFoundHarness(t *testing.T, ttl time.Duration, maxEntries int) (*harness, *enginetest.FakeClock, *notFoundMetrics) {
	t.Helper()
	clock := enginetest.NewFakeClock()
	met := &notFoundMetrics{}
	h := newHarness(t, harnessOptions{cfg: Config{NotFoundTTL: ttl, NotFoundMaxEntries: maxEntries, Now: clock.Now, Metrics: met}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
	return h, clock, met
}

func madeUp(name string) addrs.Provider {
	return addrs.Provider{Hostname: originHost, Namespace: ns, Type: name}
}

// A provider the origin does not have is asked of it once in the
// period, however many times it is asked for; the answer is the
// origin's not-found each time, in the same words; once the period
// ended the origin is asked again, and a provider it published since is
// found.
func TestNotFoundRememberedForItsPeriod(t *testing.T) {
	t.Parallel()
	const ttl = time.Minute
	h, clock, met := notFoundHarness(t, ttl, 0)
	ctx := t.Context()
	var first error
	for i := range 20 {
		_, _, err := h.engine.Versions(ctx, madeUp("typo"))
		if !errors.Is(err, discovery.ErrNotFound) {
			t.Fatalf("request %d: %v, want the origin's not found", i, err)
		}
		if first == nil {
			first = err
		} else if err.Error() != first.Error() {
			t.Fatalf("request %d answered %q, the origin answered %q", i, err, first)
		}
	}
	if n := h.origin.Hits(fakeorigin.Versions); n != 1 {
		t.Fatalf("the origin was asked for the version list %d times in the period, want 1", n)
	}
	if r, e := met.remembered.Load(), met.entries.Load(); r != 19 || e != 1 {
		t.Fatalf("metrics: %d answers from memory, %d entries; want 19, 1", r, e)
	}
	if got := h.engine.NotFound().Entries(originHost); got != 1 {
		t.Fatalf("Entries = %d, want 1", got)
	}

	// The provider is published; still remembered until the period ends.
	h.origin.AddProvider(ns, "typo", []string{"0.1.0"}, []string{"linux_amd64"})
	clock.Add(ttl - time.Second)
	if _, _, err := h.engine.Versions(ctx, madeUp("typo")); !errors.Is(err, discovery.ErrNotFound) {
		t.Fatalf("within the period: %v, want the remembered not found", err)
	}
	clock.Add(time.Second)
	list, _, err := h.engine.Versions(ctx, madeUp("typo"))
	if err != nil || len(list.Versions) != 1 {
		t.Fatalf("after the period: %v, %v; want the version published", list, err)
	}
	if n := h.origin.Hits(fakeorigin.Versions); n != 2 {
		t.Fatalf("the origin was asked %d times, want 2 (once more after the period)", n)
	}
	if e := met.entries.Load(); e != 0 {
		t.Fatalf("%d entries after the origin found it, want 0", e)
	}
}

// A version's package the origin has not for a platform is remembered
// too: once the record's finding of the missing platform is no longer
// believed (after the version list's time to live), the platform is left
// out again without asking the origin while its 404 is remembered.
func TestNotFoundPackageRemembered(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ttl  time.Duration
		want int
	}{{time.Hour, 1}, {0, 2}} {
		t.Run(fmt.Sprint(tc.ttl), func(t *testing.T) {
			t.Parallel()
			h, clock, _ := notFoundHarness(t, tc.ttl, 0)
			// The origin lists darwin_arm64, and answers 404 for its package.
			h.origin.AddProvider(ns, "listed", []string{"1.0.0"}, []string{"linux_amd64", "darwin_arm64"})
			h.origin.SetKindStatus(fakeorigin.Download, 404)
			p := madeUp("listed")
			for i := range 2 {
				pkg, err := h.engine.Package(t.Context(), p, mustVersion(t, "1.0.0"), []addrs.Platform{mustPlatform(t, "darwin_arm64")})
				if err != nil || len(pkg.Archives) != 0 {
					t.Fatalf("request %d: %v, %v; want no archive", i, pkg, err)
				}
				clock.Add(11 * time.Minute) // past the version list's time to live
			}
			if n := h.origin.Hits(fakeorigin.Download); n != tc.want {
				t.Fatalf("the origin was asked for the package %d times, want %d", n, tc.want)
			}
		})
	}
}

// What the origin fails to answer is never remembered: a 503, a 429 and
// a 500 are asked again on the next request (two requests: the origin
// client's circuit breaker opens after five failed attempts).
func TestNotFoundFailuresAsked(t *testing.T) {
	t.Parallel()
	for _, status := range []int{503, 429, 500} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			h, _, met := notFoundHarness(t, time.Minute, 0)
			h.origin.SetKindStatus(fakeorigin.Versions, status)
			before := 0
			for i := range 2 {
				if _, _, err := h.engine.Versions(t.Context(), madeUp("typo")); err == nil || errors.Is(err, discovery.ErrNotFound) {
					t.Fatalf("request %d: %v, want the origin's failure", i, err)
				}
				n := h.origin.Hits(fakeorigin.Versions)
				if n <= before {
					t.Fatalf("request %d did not reach the origin (hits %d, before %d)", i, n, before)
				}
				before = n
			}
			if r, e := met.remembered.Load(), met.entries.Load(); r != 0 || e != 0 {
				t.Fatalf("metrics: %d answers from memory, %d entries; want none", r, e)
			}
		})
	}
}

// With no period (not_found_ttl = 0), every request reaches the origin.
func TestNotFoundDisabled(t *testing.T) {
	t.Parallel()
	h, _, _ := notFoundHarness(t, 0, 0)
	for range 5 {
		if _, _, err := h.engine.Versions(t.Context(), madeUp("typo")); !errors.Is(err, discovery.ErrNotFound) {
			t.Fatalf("%v, want not found", err)
		}
	}
	if n := h.origin.Hits(fakeorigin.Versions); n != 5 {
		t.Fatalf("the origin was asked %d times, want 5", n)
	}
	if h.engine.NotFound().TTL() != 0 || h.engine.NotFound().Entries(originHost) != 0 || h.engine.Config().NotFoundTTL != 0 {
		t.Fatal("an engine without a period remembers")
	}
}

// However many made-up names are asked for, the entries held stay within
// the bound; each name costs the origin one request.
func TestNotFoundBoundHolds(t *testing.T) {
	t.Parallel()
	const max = 8
	h, _, met := notFoundHarness(t, time.Hour, max)
	for i := range 5 * max {
		if _, _, err := h.engine.Versions(t.Context(), madeUp(fmt.Sprintf("made-up-%d", i))); !errors.Is(err, discovery.ErrNotFound) {
			t.Fatalf("%v, want not found", err)
		}
		if e := h.engine.NotFound().Entries(originHost); e > max {
			t.Fatalf("%d entries held after %d names, want at most %d", e, i+1, max)
		}
	}
	if e := met.entries.Load(); e != max {
		t.Fatalf("entries gauge %d, want %d", e, max)
	}
	if n := h.origin.Hits(fakeorigin.Versions); n != 5*max {
		t.Fatalf("the origin was asked %d times, want %d", n, 5*max)
	}
}

// Many clients asking at once for a few made-up names, and the module
// of one: each name costs the origin exactly one request.
func TestNotFoundConcurrent(t *testing.T) {
	t.Parallel()
	h, _, _ := notFoundHarness(t, time.Minute, 0)
	names := []string{"typo-a", "typo-b", "typo-c"}
	mod := addrs.Module{Hostname: originHost, Namespace: ns, Name: "typo", System: "aws"}
	var wg sync.WaitGroup
	errs := make(chan error, 16*20)
	for g := range 16 {
		wg.Go(func() {
			for i := range 20 {
				ctx := context.Background()
				if g%4 == 0 {
					if _, _, err := h.engine.Modules().ModuleVersions(ctx, mod); !errors.Is(err, discovery.ErrNotFound) {
						errs <- fmt.Errorf("module: %v", err)
					}
					continue
				}
				if _, _, err := h.engine.Versions(ctx, madeUp(names[(g+i)%len(names)])); !errors.Is(err, discovery.ErrNotFound) {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("%v, want not found", err)
	}
	if n := h.origin.Hits(fakeorigin.Versions); n != len(names) {
		t.Fatalf("the origin was asked for version lists %d times, want %d (one per name)", n, len(names))
	}
	if n := h.origin.Hits(fakeorigin.ModuleVersions); n != 1 {
		t.Fatalf("the origin was asked for the module's versions %d times, want 1", n)
	}
}

// What the cache holds is served as before: a fresh version list is not
// hidden by a not-found remembered for it, and a stale one is still
// served when the origin fails.
func TestNotFoundCacheFirst(t *testing.T) {
	t.Parallel()
	h, clock, _ := notFoundHarness(t, time.Hour, 0)
	p := h.provider()
	if _, _, err := h.engine.Versions(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	// The origin fails; the list, refreshed after its time to live, is
	// served stale, and no failure is remembered.
	h.origin.SetKindStatus(fakeorigin.Versions, 503)
	clock.Add(11 * time.Minute)
	for range 3 {
		list, st, err := h.engine.Versions(t.Context(), p)
		if err != nil || !st.Stale || len(list.Versions) != 1 {
			t.Fatalf("origin failing: %v, %+v, %v; want the cached list, stale", list, st, err)
		}
	}
	if e := h.engine.NotFound().Entries(originHost); e != 0 {
		t.Fatalf("%d entries after failures, want 0", e)
	}
}

// A sync through the admin socket and an import forget what is
// remembered of what they name (Memory.ForgetProvider, as admin's
// Versions and AirGap.Import call it): the origin is asked again at once.
func TestNotFoundForgottenForAProvider(t *testing.T) {
	t.Parallel()
	h, _, _ := notFoundHarness(t, time.Hour, 0)
	for range 3 {
		h.engine.Versions(t.Context(), madeUp("typo"))
		h.engine.Versions(t.Context(), madeUp("other"))
	}
	h.origin.AddProvider(ns, "typo", []string{"0.1.0"}, []string{"linux_amd64"})
	h.engine.NotFound().ForgetProvider(madeUp("typo"))
	if _, _, err := h.engine.Versions(t.Context(), madeUp("typo")); err != nil {
		t.Fatalf("after forgetting: %v, want the published version", err)
	}
	h.engine.Versions(t.Context(), madeUp("other"))
	if n := h.origin.Hits(fakeorigin.Versions); n != 3 {
		t.Fatalf("the origin was asked %d times, want 3 (each name once, typo again once forgotten)", n)
	}
}

// An import of a version of a provider forgets what is remembered of the
// provider: the next request for it asks the origin again.
func TestNotFoundForgottenByImport(t *testing.T) {
	t.Parallel()
	src := newHarness(t, harnessOptions{})
	src.origin.AddProvider(ns, "inhouse", []string{"1.0.0"}, []string{"linux_amd64"})
	p := madeUp("inhouse")
	ev, err := src.engine.Evidence(t.Context(), p, mustVersion(t, "1.0.0"), nil)
	if err != nil {
		t.Fatal(err)
	}
	dst, _, _ := notFoundHarness(t, time.Hour, 0)
	for range 2 {
		if _, _, err := dst.engine.Versions(t.Context(), p); !errors.Is(err, discovery.ErrNotFound) {
			t.Fatalf("before the import: %v, want not found", err)
		}
	}
	if n, e := dst.origin.Hits(fakeorigin.Versions), dst.engine.NotFound().Entries(originHost); n != 1 || e != 1 {
		t.Fatalf("before the import: origin asked %d times, %d entries; want 1, 1", n, e)
	}
	in := enginetest.ImportedFrom(ev, func(pl string) []byte { return src.origin.Archive(ns, "inhouse", "1.0.0", pl) })
	in.Version = mustVersion(t, "1.0.0")
	if _, err := dst.engine.AirGap().Import(t.Context(), in); err != nil {
		t.Fatalf("Import: %v", err)
	}
	if e := dst.engine.NotFound().Entries(originHost); e != 0 {
		t.Fatalf("%d entries after the import, want 0", e)
	}
	dst.engine.Versions(t.Context(), p)
	if n := dst.origin.Hits(fakeorigin.Versions); n != 2 {
		t.Fatalf("after the import the origin was asked %d times in all, want 2", n)
	}
}

// A host whose service discovery answers 404 is no provider registry (a
// misconfigured origin): that is not the origin saying a provider does
// not exist, and nothing is remembered.
func TestNotFoundNotFromDiscovery(t *testing.T) {
	t.Parallel()
	h, _, met := notFoundHarness(t, time.Minute, 0)
	h.origin.SetKindStatus(fakeorigin.Discovery, 404)
	for range 3 {
		_, _, err := h.engine.Versions(t.Context(), madeUp("typo"))
		if err == nil || errors.Is(err, discovery.ErrNotFound) {
			t.Fatalf("%v, want the host's failure to be a registry", err)
		}
	}
	if r, e := met.remembered.Load(), h.engine.NotFound().Entries(originHost); r != 0 || e != 0 {
		t.Fatalf("%d answers from memory, %d entries; want none", r, e)
	}
}

// The release times the package policy judges by are asked of the origin
// afresh, never answered from the not-found memory (releaseOrigin in
// New). A provider not found, then published with its version list ahead
// of its downloads: while the downloads answer 404 no release time is
// known, and both versions are held (a not-found never dates a version
// "long ago"); once they are published, the release times are learned at
// once, within the memory's period, and the versions are judged by their
// signatures: the old one served, the new one held until 72h after it
// was signed. With the memory as without it.
func TestNotFoundReleaseTimesAskedAfresh(t *testing.T) {
	t.Parallel()
	for _, ttl := range []time.Duration{time.Hour, 0} {
		t.Run(fmt.Sprint(ttl), func(t *testing.T) {
			t.Parallel()
			h, clock, _ := notFoundHarness(t, ttl, 0)
			h.engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
			ctx := t.Context()
			p := madeUp("late")
			clock.Set(time.Now().Truncate(time.Second)) // a signature's time is in whole seconds
			now := clock.Now()
			for range 2 {
				if _, _, err := h.engine.Versions(ctx, p); !errors.Is(err, discovery.ErrNotFound) {
					t.Fatalf("before it is published: %v, want not found", err)
				}
			}

			h.origin.AddProvider(ns, "late", []string{"0.9.0", "1.0.0"}, []string{"linux_amd64"})
			h.origin.SetSignedAt(ns, "late", "0.9.0", now.Add(-400*24*time.Hour))
			h.origin.SetSignedAt(ns, "late", "1.0.0", now.Add(-time.Hour))
			h.origin.SetKindStatus(fakeorigin.Download, 404)
			clock.Add(ttl) // the version list's not-found is forgotten
			for i := range 2 {
				list, _, err := h.engine.Versions(ctx, p)
				if err != nil || len(list.Versions) != 0 || len(list.Held) != 2 {
					t.Fatalf("request %d, downloads not published: %+v, %v; want both versions held", i, list, err)
				}
				_, err = h.engine.Package(ctx, p, mustVersion(t, "1.0.0"), []addrs.Platform{mustPlatform(t, "linux_amd64")})
				var perr *gate.PolicyError
				if !errors.As(err, &perr) || perr.Verdict.Rule != policy.RuleMinReleaseAge || !perr.Verdict.AvailableAt.IsZero() {
					t.Fatalf("request %d, downloads not published: %v, want held with no release time known", i, err)
				}
			}
			asked := h.origin.Hits(fakeorigin.Download)
			if asked < 2 {
				t.Fatalf("the origin was asked for a download answer %d times, want every request to ask", asked)
			}

			h.origin.SetKindStatus(fakeorigin.Download, 0)
			list, _, err := h.engine.Versions(ctx, p)
			if err != nil || !slices.Equal(list.Names(), []string{"0.9.0"}) {
				t.Fatalf("downloads published: %v, %v; want 0.9.0 listed, 1.0.0 held", list, err)
			}
			if h.origin.Hits(fakeorigin.Download) <= asked {
				t.Fatal("the release times were not asked of the origin again")
			}
			_, err = h.engine.Package(ctx, p, mustVersion(t, "1.0.0"), []addrs.Platform{mustPlatform(t, "linux_amd64")})
			var perr *gate.PolicyError
			if want := now.Add(71 * time.Hour); !errors.As(err, &perr) || !perr.Verdict.AvailableAt.Equal(want) {
				t.Fatalf("1.0.0: %v, want held until %v", err, want)
			}
			if pkg, err := h.engine.Package(ctx, p, mustVersion(t, "0.9.0"), []addrs.Platform{mustPlatform(t, "linux_amd64")}); err != nil || len(pkg.Archives) != 1 {
				t.Fatalf("0.9.0: %v, %v; want its package", pkg, err)
			}
		})
	}
}

// A module is dated by the engine's own listings alone: a version list
// the memory answers not found for is no listing, and once the origin is
// asked again a version it added is dated by the listing before the
// not-found, as without the memory. While the not-found is remembered, a
// version no stored listing names is not served.
func TestNotFoundModuleListedAfresh(t *testing.T) {
	t.Parallel()
	for _, ttl := range []time.Duration{time.Hour, 0} {
		t.Run(fmt.Sprint(ttl), func(t *testing.T) {
			t.Parallel()
			clock := enginetest.NewFakeClock()
			// Ahead of the cache's clock: every listing has expired.
			clock.Set(time.Now().Truncate(time.Second).Add(30 * 24 * time.Hour))
			h := newHarness(t, harnessOptions{cfg: Config{NotFoundTTL: ttl, Now: clock.Now, VersionsTTL: time.Minute, Metrics: &notFoundMetrics{}}})
			h.engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
			mod := addrs.Module{Hostname: originHost, Namespace: ns, Name: "late", System: "aws"}
			h.origin.AddTarball("late.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# late\n")}))
			h.origin.AddModule(ns, "late", "aws", "1.0.0", h.origin.TarballURL("late.tar.gz"))
			mods := h.engine.Modules()
			ctx := t.Context()
			first := clock.Now()
			if _, _, err := mods.ModuleVersions(ctx, mod); err != nil {
				t.Fatal(err)
			}

			clock.Add(time.Hour)
			h.origin.SetKindStatus(fakeorigin.ModuleVersions, 404)
			if _, _, err := mods.ModuleVersions(ctx, mod); !errors.Is(err, discovery.ErrNotFound) {
				t.Fatalf("%v, want not found", err)
			}
			h.origin.SetKindStatus(fakeorigin.ModuleVersions, 0)
			h.origin.AddModule(ns, "late", "aws", "1.1.0", h.origin.TarballURL("late.tar.gz"))
			if _, err := mods.ModuleLocation(ctx, mod, enginetest.MustModuleVersion(t, "1.1.0")); err == nil {
				t.Fatal("1.1.0, added after the listing before the not-found: served at once")
			}

			clock.Add(ttl)
			list, _, err := mods.ModuleVersions(ctx, mod)
			if err != nil || !slices.Equal(list.Versions, []string{"1.0.0"}) {
				t.Fatalf("listed %v, %v; want 1.0.0, 1.1.0 held", list, err)
			}
			_, err = mods.ModuleLocation(ctx, mod, enginetest.MustModuleVersion(t, "1.1.0"))
			var perr *gate.PolicyError
			if want := first.Add(72 * time.Hour); !errors.As(err, &perr) || !perr.Verdict.AvailableAt.Equal(want) {
				t.Fatalf("1.1.0: %v, want held until %v (72h after the listing that lacked it)", err, want)
			}
			if _, err := mods.ModuleLocation(ctx, mod, enginetest.MustModuleVersion(t, "1.0.0")); err != nil {
				t.Fatalf("1.0.0: %v", err)
			}
		})
	}
}

// On an origin that matches module names with their case, a client's
// spelling the origin lacks is remembered for that spelling only: the
// module's own spelling is asked of the origin and found, and from then
// on every spelling is served the module from the cache (one module for
// all its spellings), the remembered 404 of the other notwithstanding.
func TestNotFoundModuleSpelling(t *testing.T) {
	t.Parallel()
	h, _, _ := notFoundHarness(t, time.Hour, 0)
	h.origin.AddTarball("vpc.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc\n")}))
	h.origin.AddModule(ns, "vpc", "aws", "1.0.0", h.origin.TarballURL("vpc.tar.gz"))
	spelt := func(namespace, name string) addrs.Module {
		t.Helper()
		m, err := addrs.NewModule(originHost, namespace, name, "aws")
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	mods, ctx := h.engine.Modules(), t.Context()
	wrong, right := spelt("HashiCorp", "VPC"), spelt(ns, "vpc")
	for range 2 {
		if _, _, err := mods.ModuleVersions(ctx, wrong); !errors.Is(err, discovery.ErrNotFound) {
			t.Fatalf("a spelling the origin lacks: %v, want not found", err)
		}
	}
	if n := h.origin.Hits(fakeorigin.ModuleVersions); n != 1 {
		t.Fatalf("the origin was asked %d times, want 1", n)
	}
	for _, m := range []addrs.Module{right, wrong} {
		list, _, err := mods.ModuleVersions(ctx, m)
		if err != nil || !slices.Equal(list.Versions, []string{"1.0.0"}) {
			t.Fatalf("%v after the module was found: %v, %v; want 1.0.0", m.OriginPath(), list, err)
		}
	}
	if n := h.origin.Hits(fakeorigin.ModuleVersions); n != 2 {
		t.Fatalf("the origin was asked %d times, want 2 (the wrong spelling once, the right one once)", n)
	}
}
