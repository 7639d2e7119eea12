package retention

import (
	"bytes"
	"sync"
	"testing"

	"github.com/tfmirror/tfmirror/v2/mirror"
	mirrorheld "github.com/tfmirror/tfmirror/v2/mirror/inventory"
)

// importAfterScan is an engine whose first ScanVersions, once it has
// listed every version, runs an import: one that ends between the rules'
// reading of what the cache holds and their removals.
type importAfterScan struct {
	Engine
	mu      sync.Mutex
	import_ func() // run by the next ScanVersions, once
}

func (e *importAfterScan) ScanVersions(fn func(mirrorheld.Record)) error {
	err := e.Engine.ScanVersions(fn)
	e.mu.Lock()
	run := e.import_
	e.import_ = nil
	e.mu.Unlock()
	if run != nil {
		run()
	}
	return err
}

// An import that ends while the rules remove the packages of a version
// that can be fetched again keeps what it brought: an archive the rules
// picked (byte for byte the package of an origin's version they remove)
// that the import's record now names cannot be fetched again for it, and
// is not removed.
func TestRulesKeepAnArchiveImportedDuringTheirPass(t *testing.T) {
	t.Parallel()
	var h *harness
	wrapped := &importAfterScan{}
	h = newHarness(t, harnessOptions{
		cfg:  mirror.Config{UnsignedHosts: []string{originHost}},
		ret:  Config{KeepVersions: 1, Interval: -1},
		wrap: func(e Engine) Engine { wrapped.Engine = e; return wrapped },
	})
	h.origin.AddProvider(ns, typ, []string{"1.0.0", "2.0.0"}, []string{"linux_amd64"})
	h.readAll("1.0.0", "2.0.0")
	h.waitIdle()
	old := h.origin.Archive(ns, typ, "1.0.0", "linux_amd64")
	sha := h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")
	// An in-house 9.0.0 whose package is, byte for byte, the origin's
	// 1.0.0's.
	in, _ := unsignedImport(t, h.provider(), "9.0.0", 1<<10, 1)
	in.Packages[0].Open = opener(old)
	// The background rebuilds stop, so that the pass's reading is the
	// one the import follows.
	h.ret.Close()
	wrapped.mu.Lock()
	wrapped.import_ = func() {
		if _, err := h.engine.AirGap().Import(t.Context(), in); err != nil {
			t.Errorf("import of 9.0.0: %v", err)
		}
	}
	wrapped.mu.Unlock()
	if _, err := h.ret.Prune(t.Context(), PruneRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.StatBlob(sha); err != nil {
		t.Errorf("the package imported for 9.0.0, which cannot be fetched again, was removed by the rules: %v", err)
	}
	got, err := h.read(t.Context(), "9.0.0", "linux_amd64")
	if err != nil || !bytes.Equal(got, old) {
		t.Errorf("9.0.0 after the pass: %d bytes, %v", len(got), err)
	}
}
