package proxy

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// Many clients over a working set several times the cache's size limit:
// every archive request is answered 200 with the whole archive, never a
// 5xx of the mirror's own making (eviction never fails a client).
func TestTinyCacheLimitNoServerErrors(t *testing.T) {
	t.Parallel()
	const size = 32 << 10
	h := newHarness(t, harnessOptions{
		origin: fakeorigin.Options{ArchiveSize: size},
		store:  cache.Options{MaxBytes: size + size/2},
	})
	vs := []string{"1.0.0", "2.0.0", "3.0.0"}
	h.origin.AddProvider(ns, typ, vs, platforms)
	var wg sync.WaitGroup
	errs := make(chan string, 12*len(vs)*len(platforms)*2)
	for c := range 12 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(c), 11))
			for range 2 {
				for _, i := range r.Perm(len(vs) * len(platforms)) {
					v, pl := vs[i/len(platforms)], platforms[i%len(platforms)]
					got := h.get(archivePath(v, pl))
					if got.status != 200 || got.err != nil || !bytes.Equal(got.body, h.origin.Archive(ns, typ, v, pl)) {
						errs <- fmt.Sprintf("%s %s: status %d, %v, %d bytes", v, pl, got.status, got.err, len(got.body))
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	h.waitIdle()
}
