package retention

import (
	"reflect"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/mirror"
)

// A mirror that served for days without the unused rule, then turned it
// on (or pruned by it with `cache prune`), counts the downloads made
// meanwhile: a version downloaded yesterday is not unused, whenever it
// was cached.
func TestRetentionUnusedCountsUsesBeforeTheRule(t *testing.T) {
	t.Parallel()
	clock := enginetest.NewFakeClock()
	opts := harnessOptions{cacheDir: t.TempDir(), cfg: mirror.Config{Now: clock.Now}, ret: Config{Interval: -1}}
	h := newHarness(t, opts)
	all := []string{"1.0.0", "2.0.0"}
	h.origin.AddProvider(ns, typ, all, []string{"linux_amd64"})
	h.readAll(all...) // day 0
	clock.Add(6 * 24 * time.Hour)
	h.readAll("2.0.0") // day 6
	h.stop()

	opts.ret = Config{UnusedAfter: 7 * 24 * time.Hour, Interval: -1}
	h.start(opts)
	clock.Add(2 * 24 * time.Hour) // day 8: 1.0.0 unused for 8 days, 2.0.0 for 2
	done, err := h.ret.Prune(t.Context(), PruneRequest{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := removalNames(done), []string{"1.0.0 unused"}; !reflect.DeepEqual(got, want) {
		t.Errorf("would remove %v, want %v", got, want)
	}
}

// A version downloaded long ago, its packages removed since as unused,
// then cached again by a sync (which is no download) counts from when it
// was cached again: the next pass does not remove what the sync just
// brought.
func TestRetentionUnusedCountsFromARecaching(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{ret: Config{UnusedAfter: 7 * 24 * time.Hour, Interval: -1}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
	// Its last download, 40 days ago, as the batches of last uses wrote it.
	if err := h.store.PutMeta(lastUsePrefix+packageKey(h.provider(), "1.0.0"), lastUseDoc{At: time.Now().Add(-40 * 24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.engine.EnsureArchive(t.Context(), h.provider(), mustVersion(t, "1.0.0"), mustPlatform(t, "linux_amd64")); err != nil {
		t.Fatal(err)
	}
	h.waitCommitted(h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64"))
	done, err := h.ret.Prune(t.Context(), PruneRequest{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 0 {
		t.Errorf("a version cached a moment ago would be removed as unused: %v", removalNames(done))
	}
}
