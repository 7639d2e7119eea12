package mirror

// The cache's size limit as the engine meets it, without retention above
// it: what is evicted is fetched again, and a version of a local-only
// host whose packages are gone is no longer listed.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/imports"
)

// A version of a local-only host whose packages are gone is not listed.
func TestLocalVersionWithoutPackagesNotListed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	local := addrs.Provider{Hostname: "tf.corp.test", Namespace: "platform", Type: "thing"}
	shas := map[string]string{}
	for i, vs := range []string{"1.0.0", "2.0.0"} {
		zipped := enginetest.ZipOfSize(t, "thing", 1024, uint64(i))
		sum := sha256.Sum256(zipped)
		shas[vs] = hex.EncodeToString(sum[:])
		in := imports.Imported{Provider: local, Version: mustVersion(t, vs), Unsigned: true, Packages: []imports.Package{{
			Platform: "linux_amd64", Filename: "terraform-provider-thing_" + vs + "_linux_amd64.zip", Document: -1,
			Open: func(context.Context) (io.ReadCloser, int64, error) {
				return io.NopCloser(bytes.NewReader(zipped)), int64(len(zipped)), nil
			},
		}}}
		if _, err := h.engine.AirGap().Import(t.Context(), in); err != nil {
			t.Fatal(err)
		}
	}
	// Lost as an earlier release's size limit lost them.
	if err := cachetest.DeleteBlob(h.store, shas["1.0.0"]); err != nil {
		t.Fatal(err)
	}
	list, _, err := h.engine.Versions(t.Context(), local)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Versions) != 1 || list.Versions[0].Version != "2.0.0" {
		t.Errorf("versions %+v, want 2.0.0 only", list.Versions)
	}
}

// Eviction never fails a client: with a working set far larger than the
// size limit and many clients at once, every client gets every archive
// whole (from the cache, a download under way, or the origin again).
func TestTinySizeLimitManyClients(t *testing.T) {
	t.Parallel()
	const size = 32 << 10
	h := newHarness(t, harnessOptions{
		origin: fakeorigin.Options{ArchiveSize: size},
		store:  cache.Options{MaxBytes: size + size/2},
	})
	vs := []string{"1.0.0", "2.0.0", "3.0.0", "4.0.0"}
	h.origin.AddProvider(ns, typ, vs, platforms)
	var wg sync.WaitGroup
	errs := make(chan string, 16*len(vs)*len(platforms)*2)
	for c := range 16 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(c), 7))
			for range 2 {
				for _, i := range r.Perm(len(vs) * len(platforms)) {
					v, pl := vs[i/len(platforms)], platforms[i%len(platforms)]
					got := h.read(context.Background(), v, pl)
					if got.err != nil || !bytes.Equal(got.body, h.origin.Archive(ns, typ, v, pl)) {
						errs <- fmt.Sprintf("%s %s: %v (%d bytes)", v, pl, got.err, len(got.body))
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
	if err := cachetest.Evict(t.Context(), h.store); err != nil {
		t.Fatal(err)
	}
	if _, total := h.store.Stats(); total > size+size/2 {
		t.Errorf("the cache holds %d bytes over its %d limit once clients are gone", total, size+size/2)
	}
}
