package retention

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	enginerig "github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/mirror"
)

// usesUnanswered is a shared store whose reads of last uses fail while
// failing is set.
type usesUnanswered struct {
	*enginerig.MemTier
	failing atomic.Bool
}

func (u *usesUnanswered) GetMeta(ctx context.Context, key string) (json.RawMessage, time.Time, error) {
	if u.failing.Load() && strings.HasPrefix(key, lastUsePrefix) {
		return nil, time.Time{}, errors.New("503 Slow Down")
	}
	return u.MemTier.GetMeta(ctx, key)
}

// While the shared store does not answer for the last uses, the unused
// rule removes nothing it would have to ask it about: a download on
// another replica may count. Once it answers, the rule decides again.
func TestRetentionUnusedKeepsWhileSharedUsesUnanswered(t *testing.T) {
	t.Parallel()
	clock := enginetest.NewFakeClock()
	tier := &usesUnanswered{MemTier: enginerig.NewMemTier()}
	opts := harnessOptions{cfg: mirror.Config{Now: clock.Now}, shared: tier, ret: Config{UnusedAfter: 7 * 24 * time.Hour, Interval: -1}}
	a := newHarness(t, opts)
	a.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
	b := &harness{t: t, origin: a.origin}
	b.start(opts)
	a.readAll("1.0.0")
	clock.Add(5 * 24 * time.Hour)
	b.readAll("1.0.0") // day 5, on b only
	b.stop()           // written to the shared store
	clock.Add(3 * 24 * time.Hour)
	tier.failing.Store(true)
	if done, err := a.ret.Prune(t.Context(), PruneRequest{}); len(done) != 0 {
		t.Errorf("day 8, the shared store not answering: removed %v (%v); b downloaded it on day 5", removalNames(done), err)
	}
	tier.failing.Store(false)
	clock.Add(5 * 24 * time.Hour)
	if done, err := a.ret.Prune(t.Context(), PruneRequest{}); err != nil || !reflect.DeepEqual(removalNames(done), []string{"1.0.0 unused"}) {
		t.Errorf("day 13: removed %v (%v), want 1.0.0", removalNames(done), err)
	}
}
