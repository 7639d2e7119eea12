package retention

import (
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/cache"
	mirrorheld "github.com/tfmirror/tfmirror/v2/mirror/inventory"
)

// heldScans is an engine whose listing of versions, once held, waits
// until let: a rebuild of what is kept that has not read the records yet.
type heldScans struct {
	Engine
	holding atomic.Bool
	let     chan struct{}
	once    sync.Once
}

func (e *heldScans) ScanVersions(fn func(mirrorheld.Record)) error {
	if e.holding.Load() {
		<-e.let
	}
	return e.Engine.ScanVersions(fn)
}

func (e *heldScans) release() { e.once.Do(func() { close(e.let) }) }

// A version a pin of the newest N selects is kept from the size limit
// from the moment it is served, before a rebuild of what is kept has
// resolved the newest N with it: 2.0.0, cached once 1.0.0 was pinned as
// the newest, stays cached through a pass of the size limit while that
// rebuild has not read the records. Before, it was kept only once the
// rebuild ran, and a pass of the size limit in between evicted the
// version just fetched (the one a pin asked for) while keeping the one
// it no longer pins. Once the rebuild has run, 1.0.0 is no longer pinned,
// and the size limit evicts it in place of 2.0.0.
func TestPinnedLatestKeptBeforeRebuild(t *testing.T) {
	t.Parallel()
	addr := originHost + "/" + ns + "/" + typ
	pins := &staticPins{pins: &Pins{Providers: map[string][]PinSelection{addr: {{Set: versions.All, Latest: 1, Where: "pins.hcl:2"}}}}, changed: true}
	scans := &heldScans{let: make(chan struct{})}
	h := newHarness(t, harnessOptions{
		store: cache.Options{MaxBytes: 1}, // every archive the size limit may evict goes
		ret:   Config{Interval: -1, Pins: pins},
		wrap:  func(e Engine) Engine { scans.Engine = e; return scans },
	})
	t.Cleanup(scans.release) // before the harness's Close, which waits for the rebuild
	h.origin.AddProvider(ns, typ, []string{"1.0.0", "2.0.0"}, []string{"linux_amd64"})
	old := h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")
	newest := h.origin.SHA256(ns, typ, "2.0.0", "linux_amd64")
	waitReady(t, h)
	h.readAll("1.0.0")
	waitKept(t, h, old, "1.0.0, the newest a pin selects")

	scans.holding.Store(true) // the rebuild 2.0.0 asks for reads nothing yet
	a, err := h.engine.OpenArchive(t.Context(), h.provider(), mustVersion(t, "2.0.0"), mustPlatform(t, "linux_amd64"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(a); err != nil {
		t.Fatal(err)
	}
	a.Close()
	h.waitIdle()
	if err := h.store.EvictNow(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !h.isCached("2.0.0") {
		t.Fatal("the size limit evicted 2.0.0, the newest version a pin selects, before the rebuild of what is kept")
	}
	if !h.isCached("1.0.0") {
		t.Fatal("the size limit evicted 1.0.0 before a rebuild found it pinned no longer")
	}

	scans.release()
	deadline := time.Now().Add(time.Minute) // milliseconds unless the machine is loaded
	for !h.ret.Evictable(old) {
		if time.Now().After(deadline) {
			t.Fatal("1.0.0 is still kept from the size limit a minute after the rebuild: 2.0.0 is the newest")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := h.store.EvictNow(t.Context()); err != nil {
		t.Fatal(err)
	}
	if h.isCached("1.0.0") || !h.isCached("2.0.0") {
		t.Errorf("after the rebuild, 1.0.0 cached %v, 2.0.0 cached %v; want 1.0.0 evicted, 2.0.0 kept", h.isCached("1.0.0"), h.isCached("2.0.0"))
	}
	if h.ret.Evictable(newest) {
		t.Error("2.0.0 may be evicted after the rebuild")
	}
}
