package mirror

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// Many clients of many archives under a size limit that holds two, half
// of them going away mid-download, leave no goroutine of the engine's or
// the cache's once the engine is shut down and the cache closed: every
// download, reader and watcher has an owner that ends it.
func TestNoGoroutineOutlivesTheEngine(t *testing.T) {
	const size = 256 << 10
	before := goroutineIDs()
	h := newHarness(t, harnessOptions{cacheDir: t.TempDir(), origin: fakeorigin.Options{ArchiveSize: size},
		store: cache.Options{MaxBytes: 2 * size, Evictable: func(string) bool { return true }}})
	vs := []string{"1.0.0", "1.1.0", "1.2.0", "2.0.0"}
	h.origin.AddProvider(ns, typ, vs, platforms)
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Go(func() {
			for i := range 8 {
				ctx, cancel := context.WithCancel(context.Background())
				if (g+i)%2 == 0 {
					time.AfterFunc(time.Duration(i)*time.Millisecond, cancel)
				}
				a := h.read(ctx, vs[(g+i)%len(vs)], platforms[(g*3+i)%len(platforms)])
				cancel()
				if a.err == nil && len(a.body) != size {
					t.Errorf("a read that did not fail gave %d bytes, want %d", len(a.body), size)
				}
			}
		})
	}
	wg.Wait()
	h.stop()
	deadline := time.Now().Add(time.Minute) // goroutines ending: milliseconds unless the machine is loaded
	var leaked []string
	for {
		leaked = leaked[:0]
		buf := make([]byte, 4<<20)
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if before[goroutineID(g)] {
				continue // another test's
			}
			if strings.Contains(g, "tfmirror/v2/mirror") || strings.Contains(g, "tfmirror/v2/cache") ||
				strings.Contains(g, "dgraph-io/badger") {
				if !strings.Contains(g, "TestNoGoroutineOutlivesTheEngine") && !strings.Contains(g, "testing.tRunner") {
					leaked = append(leaked, g)
				}
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(leaked) > 0 {
		t.Errorf("%d goroutines of the engine or the cache outlive them:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
	}
}

// goroutineID is the id in the header of a goroutine's stack dump.
func goroutineID(dump string) string {
	id, _, _ := strings.Cut(strings.TrimPrefix(dump, "goroutine "), " ")
	return id
}

// goroutineIDs are the ids of the goroutines running now.
func goroutineIDs() map[string]bool {
	buf := make([]byte, 4<<20)
	ids := map[string]bool{}
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		ids[goroutineID(g)] = true
	}
	return ids
}
