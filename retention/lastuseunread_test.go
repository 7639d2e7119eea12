package retention

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/mirror"
)

// failingUses is a cache whose reading of the last uses fails after the
// first one (a disk error midway).
type failingUses struct{ Store }

func (s failingUses) ScanMeta(prefix string, fn func(string, time.Time, json.RawMessage) error) error {
	if !strings.HasPrefix(prefix, lastUsePrefix) {
		return s.Store.ScanMeta(prefix, fn)
	}
	n := 0
	err := s.Store.ScanMeta(prefix, func(key string, at time.Time, raw json.RawMessage) error {
		if n++; n > 1 {
			return errors.New("input/output error")
		}
		return fn(key, at, raw)
	})
	if err == nil {
		err = errors.New("input/output error")
	}
	return err
}

// The last uses read in part (the cache failing midway) are no answer:
// the unused rule removes nothing in that pass. Before, the versions
// whose last use was not read counted from when they were cached and
// were removed as unused although downloaded the day before.
func TestRetentionUnusedRemovesNothingWhenLastUsesFailToRead(t *testing.T) {
	t.Parallel()
	clock := enginetest.NewFakeClock()
	opts := harnessOptions{cacheDir: t.TempDir(), cfg: mirror.Config{Now: clock.Now}, ret: Config{Interval: -1}}
	h := newHarness(t, opts)
	all := []string{"1.0.0", "2.0.0", "3.0.0"}
	h.origin.AddProvider(ns, typ, all, []string{"linux_amd64"})
	h.readAll(all...) // day 0
	clock.Add(6 * 24 * time.Hour)
	h.readAll(all...) // day 6
	h.stop()

	opts.ret = Config{UnusedAfter: 7 * 24 * time.Hour, Interval: -1}
	opts.wrapStore = func(s Store) Store { return failingUses{s} }
	h.start(opts)
	clock.Add(2 * 24 * time.Hour) // day 8: each used 2 days ago
	done, err := h.ret.Prune(t.Context(), PruneRequest{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 0 {
		t.Errorf("with the last uses read in part, the unused rule would remove %v", removalNames(done))
	}
}
