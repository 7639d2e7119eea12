package retention

import (
	"slices"
	"testing"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// waitReady waits for retention's first reading of what the cache holds
// (until then nothing may be evicted).
func waitReady(t *testing.T, h *harness) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // milliseconds unless the machine is loaded
	for !h.ret.Evictable("not a sha256") {
		if time.Now().After(deadline) {
			t.Fatal("retention did not read the cache within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitKept waits, a minute at most, until the size limit may no longer
// evict sha.
func waitKept(t *testing.T, h *harness, sha, what string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // milliseconds unless the machine is loaded
	for h.ret.Evictable(sha) {
		if time.Now().After(deadline) {
			t.Fatalf("the size limit may still evict the archive of %s a minute on", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A version cached after retention read the cache, which a pin selects
// among the newest N (latest = N), is kept from the size limit as soon as
// it is served, as one a pin names by its constraint alone is: before,
// only the next rebuild of what is kept (a pass of the rules, a changed
// pins file, an import) resolved the newest N again, and with no rule
// set the size limit could evict it until then.
func TestPinnedLatestCachedSinceIsKept(t *testing.T) {
	t.Parallel()
	addr := originHost + "/" + ns + "/" + typ
	pins := &staticPins{pins: &Pins{Providers: map[string][]PinSelection{addr: {{Set: versions.All, Latest: 1, Where: "pins.hcl:2"}}}}, changed: true}
	h := newHarness(t, harnessOptions{ret: Config{Interval: -1, Pins: pins}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
	waitReady(t, h)
	h.readAll("1.0.0")
	waitKept(t, h, h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64"), "1.0.0, the newest a pin selects")
}

// A pinned version a sync caches (EnsureArchive, with no client to serve)
// is kept from the size limit as one a client downloads is: before, it
// stayed evictable until the next rebuild of what is kept, and with no
// rule set the size limit could evict the versions a sync of the pins'
// own manifest had just cached.
func TestPinnedVersionSyncedIsKept(t *testing.T) {
	t.Parallel()
	addr := originHost + "/" + ns + "/" + typ
	h := newHarness(t, harnessOptions{ret: Config{Interval: -1, Pins: pinVersions(t, addr, "1.0.0")}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
	waitReady(t, h)
	if _, err := h.engine.EnsureArchive(t.Context(), h.provider(), mustVersion(t, "1.0.0"), mustPlatform(t, "linux_amd64")); err != nil {
		t.Fatal(err)
	}
	sha := h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")
	h.waitCommitted(sha)
	waitKept(t, h, sha, "the pinned 1.0.0")
}

// A pass of the rules removes what its dry run lists, also when what is
// kept from the size limit was last read before a version was cached:
// with a pin of the newest version, 1.0.0 was kept, and once 2.0.0 is
// cached the rules remove 1.0.0 (keep_versions = 1). Before, the pass
// took 1.0.0 for kept by that earlier reading and left it, though its
// dry run listed it, until the next pass.
func TestRulesRemoveWhatAnEarlierPinKept(t *testing.T) {
	t.Parallel()
	addr := originHost + "/" + ns + "/" + typ
	pins := &staticPins{pins: &Pins{Providers: map[string][]PinSelection{addr: {{Set: versions.All, Latest: 1, Where: "pins.hcl:2"}}}}, changed: true}
	h := newHarness(t, harnessOptions{ret: Config{KeepVersions: 1, Interval: -1, Pins: pins}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0", "2.0.0"}, []string{"linux_amd64"})
	h.readAll("1.0.0")
	h.ret.pins.first(h.ret.log)
	h.ret.rebuild() // 1.0.0, the newest, is pinned and kept
	h.readAll("2.0.0")
	dry, err := h.ret.Prune(t.Context(), PruneRequest{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	done, err := h.ret.Prune(t.Context(), PruneRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"1.0.0 keep-versions"}
	if got := removalNames(dry); !slices.Equal(got, want) {
		t.Errorf("dry run lists %v, want %v", got, want)
	}
	if got := removalNames(done); !slices.Equal(got, want) {
		t.Errorf("the pass removed %v, want %v", got, want)
	}
}

// A pinned module version fetched for the first time is kept from the
// size limit as it is served, as a provider version is: before, its
// package's sha256 was not known when the engine said what it serves,
// and until the next reading of what is kept (with no rule set, none
// came) the size limit could evict it.
func TestPinnedModuleFetchedIsKept(t *testing.T) {
	t.Parallel()
	pins := &staticPins{pins: &Pins{Modules: map[string][]PinSelection{
		testModule.String(): {{Set: versions.Only(mustVersion(t, "1.0.0")), Where: "pins.hcl:2"}}}}, changed: true}
	h := newHarness(t, harnessOptions{ret: Config{Interval: -1, Pins: pins}})
	o := h.origin
	o.AddTarball("vpc.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc\n")}))
	o.AddModule("acme", "vpc", "aws", "1.0.0", o.TarballURL("vpc.tar.gz"))
	waitReady(t, h)
	pkg, _, err := readModule(t, h, "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	waitKept(t, h, pkg.SHA256, "the pinned module 1.0.0")
}
