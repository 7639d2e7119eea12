package mirror

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/fetch"
)

// waitingMetrics counts the downloads waiting for a slot.
type waitingMetrics struct {
	enginetest.NoMetrics
	waiting atomic.Int64
}

func (m *waitingMetrics) ArchiveFetchWaiting() func() {
	m.waiting.Add(1)
	return func() { m.waiting.Add(-1) }
}

// Archive downloads from origins are bounded in number
// (Config.MaxArchiveDownloads): with one slot, taken by a download the
// origin holds half-way, the download of another archive waits for it,
// counted as waiting, and runs once the slot is free; the download of an
// archive whose only client left while it waited is dropped, and the
// origin is never asked for that archive. One client asking for many
// archives cannot start as many downloads, nor leave them running.
func TestArchiveDownloadsWaitForASlot(t *testing.T) {
	t.Parallel()
	met := &waitingMetrics{}
	h := newHarness(t, harnessOptions{cfg: Config{MaxArchiveDownloads: 1, Metrics: met}, origin: fakeorigin.Options{ArchiveSize: 64 << 10}})
	vs := []string{"1.0.0", "2.0.0", "3.0.0"}
	h.origin.AddProvider(ns, typ, vs, []string{"linux_amd64"})
	for _, v := range vs {
		if _, err := h.packages(v); err != nil {
			t.Fatal(err)
		}
	}
	joined := make(chan struct{}, len(vs))
	h.engine.archives.SetHooks(fetch.Hooks{Join: func(string, *fetch.Download) { joined <- struct{}{} }})
	release := h.origin.GateArchives()
	defer release()

	results := make([]archive, len(vs))
	var wg sync.WaitGroup
	read := func(i int, ctx context.Context) {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = h.read(ctx, vs[i], "linux_amd64") }()
	}
	read(0, context.Background())
	<-joined
	h.origin.WaitArchiveStarted() // 1.0.0 holds the one slot
	leaving, leave := context.WithCancel(context.Background())
	read(1, leaving)
	read(2, context.Background())
	<-joined
	<-joined
	for deadline := time.Now().Add(time.Minute); met.waiting.Load() != 2; {
		if time.Now().After(deadline) {
			t.Fatalf("%d downloads wait for a slot, want 2", met.waiting.Load())
		}
		time.Sleep(time.Millisecond)
	}
	if n := h.origin.ArchiveHits(ns, typ, "3.0.0", "linux_amd64"); n != 0 {
		t.Fatalf("3.0.0 was asked of the origin %d times while the one slot was taken", n)
	}
	leave() // 2.0.0's only client goes
	for deadline := time.Now().Add(time.Minute); met.waiting.Load() != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("%d downloads wait for a slot once 2.0.0's client left, want 1", met.waiting.Load())
		}
		time.Sleep(time.Millisecond)
	}
	release()
	wg.Wait()
	h.waitIdle()
	for _, i := range []int{0, 2} {
		if r := results[i]; r.err != nil || !bytes.Equal(r.body, h.origin.Archive(ns, typ, vs[i], "linux_amd64")) {
			t.Errorf("%s: %v, %d bytes", vs[i], r.err, len(r.body))
		}
	}
	if results[1].err == nil {
		t.Error("2.0.0, whose client left, was read")
	}
	if n := h.origin.ArchiveHits(ns, typ, "2.0.0", "linux_amd64"); n != 0 {
		t.Errorf("2.0.0, whose client left before a slot was free, was asked of the origin %d times", n)
	}
	if met.waiting.Load() != 0 {
		t.Errorf("%d downloads still counted as waiting", met.waiting.Load())
	}
}
