package retention

import (
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

// A prune reads the pins first: a version pinned a moment before (a lock
// file just put in the pins directory, then `tfmirror cache prune`
// through the running serve) is kept, by a dry run and by the prune,
// without waiting for the pins' next check; and the size limit keeps it
// from then on.
func TestRetentionPruneReadsPinsFirst(t *testing.T) {
	t.Parallel()
	p := addrs.Provider{Hostname: originHost, Namespace: ns, Type: typ}
	pins := pinVersions(t, p.String()) // none pinned yet
	h := newHarness(t, harnessOptions{ret: Config{KeepVersions: 1, Interval: -1, Pins: pins}})
	all := []string{"1.0.0", "2.0.0"}
	h.origin.AddProvider(ns, typ, all, []string{"linux_amd64"})
	h.readAll(all...)
	h.ret.pins.first(h.ret.log) // the serve read the pins at start

	pinned := pinVersions(t, p.String(), "1.0.0")
	pins.mu.Lock()
	pins.pins, pins.changed = pinned.pins, true
	pins.mu.Unlock()

	dry, err := h.ret.Prune(t.Context(), PruneRequest{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(dry) != 0 {
		t.Errorf("dry run lists %v, want nothing: 1.0.0 is pinned", removalNames(dry))
	}
	sha := h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")
	// The rebuild the changed pins ask for keeps it from the size limit.
	deadline := time.Now().Add(time.Minute) // milliseconds unless the machine is loaded
	for h.ret.Evictable(sha) {
		if time.Now().After(deadline) {
			t.Fatal("the size limit may still evict the archive of the pinned 1.0.0 a minute on")
		}
		time.Sleep(10 * time.Millisecond)
	}
	done, err := h.ret.Prune(t.Context(), PruneRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 0 {
		t.Errorf("prune removed %v, want nothing: 1.0.0 is pinned", removalNames(done))
	}
	if !h.isCached("1.0.0") {
		t.Error("the pinned 1.0.0 was removed")
	}
}

// A prune naming a pinned version is refused, naming the pin, and
// removes nothing (a dry run is refused as the prune is): a pinned
// version is kept until its pin is removed. Before, the dry run listed
// it and the prune then kept it without a word.
func TestRetentionNamedPruneOfPinnedRefused(t *testing.T) {
	t.Parallel()
	p := addrs.Provider{Hostname: originHost, Namespace: ns, Type: typ}
	h := newHarness(t, harnessOptions{ret: Config{Interval: -1, Pins: pinVersions(t, p.String(), "1.0.0")}})
	all := []string{"1.0.0", "2.0.0"}
	h.origin.AddProvider(ns, typ, all, []string{"linux_amd64"})
	h.readAll(all...)
	for _, dry := range []bool{true, false} {
		done, err := h.ret.Prune(t.Context(), PruneRequest{DryRun: dry, Provider: &p, Versions: []string{"2.0.0", "1.0.0"}})
		if err == nil || !strings.Contains(err.Error(), "1.0.0") || !strings.Contains(err.Error(), "test.lock.hcl:1") {
			t.Errorf("dry run %v: prune of a pinned version: %v, %v; want it refused, naming the pin", dry, removalNames(done), err)
		}
		if len(done) != 0 {
			t.Errorf("dry run %v: listed %v", dry, removalNames(done))
		}
	}
	for _, v := range all {
		if !h.isCached(v) {
			t.Errorf("%s was removed", v)
		}
	}
}
