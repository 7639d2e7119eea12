package sharedtier

import (
	"context"
	"fmt"

	"sync/atomic"
	"testing"
	"time"
)

// busyTier counts the record writes under way at once, each held until
// release is closed.
type busyTier struct {
	*fakeTier
	release      chan struct{}
	now, most, n atomic.Int64
}

func (t *busyTier) PutMeta(ctx context.Context, key string, record any) error {
	n := t.now.Add(1)
	defer t.now.Add(-1)
	for {
		m := t.most.Load()
		if n <= m || t.most.CompareAndSwap(m, n) {
			break
		}
	}
	t.n.Add(1)
	select {
	case <-t.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// A listing that records hundreds of versions (a replica's first
// listing of a provider) writes them to the tier a bounded number at a
// time, every one of them in the end, not all at once.
func TestRecordWritesBounded(t *testing.T) {
	tier := &busyTier{fakeTier: newFakeTier(), release: make(chan struct{})}
	s, life := newShared(t, tier, false)
	const records = 4 * maxRecordWrites
	for i := range records {
		s.Share(fmt.Sprintf("release/absent/provider/registry.test/acme/net/%d.0.0", i), map[string]int{"i": i})
	}
	for deadline := time.Now().Add(time.Minute); tier.now.Load() < maxRecordWrites; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d record writes under way after a minute, want %d", tier.now.Load(), maxRecordWrites)
		}
	}
	if m := tier.most.Load(); m > maxRecordWrites {
		t.Fatalf("%d record writes under way at once, want at most %d", m, maxRecordWrites)
	}
	close(tier.release)
	if err := life.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := tier.n.Load(); n != records {
		t.Errorf("%d records written, want %d", n, records)
	}
	if m := tier.most.Load(); m > maxRecordWrites {
		t.Errorf("%d record writes under way at once, want at most %d", m, maxRecordWrites)
	}
}
