package retention

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	enginerig "github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/mirror"
)

// damagedUse is the text of a last use that does not read: damaged, or
// of a schema a newer release wrote.
var damagedUse = json.RawMessage(`{"at":"yesterday"}`)

// damagedUses is a cache whose last uses read damaged.
type damagedUses struct{ Store }

func (s damagedUses) ScanMeta(prefix string, fn func(string, time.Time, json.RawMessage) error) error {
	return s.Store.ScanMeta(prefix, func(key string, at time.Time, raw json.RawMessage) error {
		if strings.HasPrefix(key, lastUsePrefix) {
			raw = damagedUse
		}
		return fn(key, at, raw)
	})
}

// A last use that does not read, in the cache or in the shared store, is
// not known: the unused rule keeps its version, as it keeps one whose
// last use the shared store did not answer for. Before, it counted as no
// use, and the rule removed a version downloaded two days before.
func TestRetentionUnusedKeepsWhenLastUseDoesNotRead(t *testing.T) {
	t.Parallel()
	const week = 7 * 24 * time.Hour
	t.Run("cache", func(t *testing.T) {
		t.Parallel()
		clock := enginetest.NewFakeClock()
		opts := harnessOptions{cacheDir: t.TempDir(), cfg: mirror.Config{Now: clock.Now}, ret: Config{Interval: -1}}
		h := newHarness(t, opts)
		h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
		h.readAll("1.0.0") // day 0
		clock.Add(6 * 24 * time.Hour)
		h.readAll("1.0.0") // day 6
		h.stop()
		opts.ret = Config{UnusedAfter: week, Interval: -1}
		opts.wrapStore = func(s Store) Store { return damagedUses{s} }
		h.start(opts)
		clock.Add(2 * 24 * time.Hour) // day 8
		if done, err := h.ret.Prune(t.Context(), PruneRequest{}); err != nil || len(done) != 0 {
			t.Errorf("day 8, its last use damaged in the cache: removed %v (%v); downloaded on day 6", removalNames(done), err)
		}
	})
	t.Run("shared", func(t *testing.T) {
		t.Parallel()
		clock := enginetest.NewFakeClock()
		tier := enginerig.NewMemTier()
		opts := harnessOptions{cfg: mirror.Config{Now: clock.Now}, shared: tier, ret: Config{UnusedAfter: week, Interval: -1}}
		a := newHarness(t, opts)
		a.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
		b := &harness{t: t, origin: a.origin}
		b.start(opts)
		a.readAll("1.0.0")
		clock.Add(6 * 24 * time.Hour)
		b.readAll("1.0.0") // day 6, on b only
		b.stop()           // written to the shared store
		key := lastUsePrefix + packageKey(a.provider(), "1.0.0")
		if raw, _, _ := tier.GetMeta(context.Background(), key); raw == nil {
			t.Fatal("b wrote no last use to the shared store")
		}
		if err := tier.PutMeta(context.Background(), key, damagedUse); err != nil {
			t.Fatal(err)
		}
		clock.Add(2 * 24 * time.Hour) // day 8
		if done, err := a.ret.Prune(t.Context(), PruneRequest{}); err != nil || len(done) != 0 {
			t.Errorf("day 8, its last use damaged in the shared store: removed %v (%v); b downloaded it on day 6", removalNames(done), err)
		}
	})
}
