package retention

import (
	"reflect"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/mirror"
)

// A command's prune on a cache over its size limit (cache prune, which
// lists what the size limit evicts) removes by the rules first, and only
// then has the size limit evict what is still over it, as its dry run
// lists it: the size limit does not evict, as the cache opens, the least
// recently used version that the rules keep, leaving the one they remove.
func TestPruneRulesBeforeTheSizeLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := harnessOptions{cacheDir: dir, ret: Config{Interval: -1}}
	h := newHarness(t, opts)
	all := []string{"1.0.0", "2.0.0", "3.0.0"}
	h.origin.AddProvider(ns, typ, all, []string{"linux_amd64"})
	// Least recently used first: 2.0.0, then 1.0.0, then 3.0.0.
	var total, size1 int64
	for _, v := range []string{"2.0.0", "1.0.0", "3.0.0"} {
		h.readAll(v)
		info, err := h.store.StatBlob(h.origin.SHA256(ns, typ, v, "linux_amd64"))
		if err != nil {
			t.Fatal(err)
		}
		total += info.Size
		if v == "1.0.0" {
			size1 = info.Size
		}
		time.Sleep(10 * time.Millisecond) // commit times apart
	}
	h.stop()

	// Without 1.0.0, which the rules remove, what is cached fits.
	limit := total - size1
	reopen := func(dryRun bool) []Removal {
		t.Helper()
		evicted := &Evictions{}
		opts.store = cache.Options{MaxBytes: limit, OnEvict: evicted.Add, Evictable: func(string) bool { return false }}
		opts.ret = Config{KeepVersions: 2, Interval: -1, Evictions: evicted, EvictNothing: dryRun, MaxBytes: limit}
		opts.cfg = mirror.Config{}
		h.start(opts)
		defer h.stop()
		// The pass of the size limit that the first rebuild asks for.
		deadline := time.Now().Add(10 * time.Second)
		for !h.ret.prot.ready.Load() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if err := h.store.EvictNow(t.Context()); err != nil {
			t.Fatal(err)
		}
		done, err := h.ret.Prune(t.Context(), PruneRequest{DryRun: dryRun})
		if err != nil {
			t.Fatal(err)
		}
		return done
	}
	dry := reopen(true)
	if want := []string{"1.0.0 keep-versions"}; !reflect.DeepEqual(removalNames(dry), want) {
		t.Fatalf("the dry run lists %v, want %v", removalNames(dry), want)
	}
	done := reopen(false)
	if !reflect.DeepEqual(removalNames(done), removalNames(dry)) {
		t.Errorf("the prune removed %v, where its dry run listed %v", removalNames(done), removalNames(dry))
	}
	h.start(harnessOptions{cacheDir: dir, ret: Config{Interval: -1}})
	if !h.isCached("2.0.0") || !h.isCached("3.0.0") {
		t.Errorf("a version the rules keep was evicted: 2.0.0 cached %v, 3.0.0 cached %v", h.isCached("2.0.0"), h.isCached("3.0.0"))
	}
}
