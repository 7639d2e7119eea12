package mirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// gatedSource holds every module source download until release is
// closed, counting those under way and the most at once.
type gatedSource struct {
	Origin
	release chan struct{}
	mu      sync.Mutex
	now     int
	most    int
	asked   atomic.Int64
}

func (o *gatedSource) OpenSource(ctx context.Context, host svchost.Hostname, u string) (io.ReadCloser, int64, error) {
	o.asked.Add(1)
	o.mu.Lock()
	o.now++
	o.most = max(o.most, o.now)
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		o.now--
		o.mu.Unlock()
	}()
	select {
	case <-o.release:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	return o.Origin.OpenSource(ctx, host, u)
}

// Module package fetches from source hosts are bounded in number
// (Config.MaxArchiveDownloads, a pool apart from the provider
// archives'): with two slots and five versions asked at once, two
// sources are asked while the other three fetches wait, counted as
// waiting; a caller that leaves is given its own context's error at once;
// once the sources answer, every version asked is served. One client
// asking for many module versions cannot start as many downloads.
func TestModuleFetchesAtOnceBounded(t *testing.T) {
	t.Parallel()
	const slots, versions = 2, 5
	met := &waitingMetrics{}
	src := &gatedSource{release: make(chan struct{})}
	h := newHarness(t, harnessOptions{cfg: Config{MaxArchiveDownloads: slots, Metrics: met, ScratchDir: t.TempDir()},
		wrapOrigin: func(o Origin) Origin { src.Origin = o; return src }})
	m := addrs.Module{Hostname: originHost, Namespace: "acme", Name: "tarball", System: "aws"}
	for i := range versions {
		v := fmt.Sprintf("0.%d.0", i+1)
		h.origin.AddTarball(v+".tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# " + v + "\n")}))
		h.origin.AddModule("acme", "tarball", "aws", v, h.origin.TarballURL(v+".tar.gz"))
	}
	errs := make(chan error, versions)
	for i := range versions {
		go func() {
			pkg, err := h.engine.Modules().OpenModule(context.Background(), m, enginetest.MustModuleVersion(t, fmt.Sprintf("0.%d.0", i+1)))
			if err == nil {
				pkg.Close()
			}
			errs <- err
		}()
	}
	for deadline := time.Now().Add(time.Minute); src.asked.Load() != slots || met.waiting.Load() != versions-slots; {
		if time.Now().After(deadline) {
			t.Fatalf("%d sources asked and %d fetches waiting, want %d and %d", src.asked.Load(), met.waiting.Load(), slots, versions-slots)
		}
		time.Sleep(time.Millisecond)
	}

	// A caller that leaves while its fetch waits for a slot.
	leaving, leave := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() {
		_, err := h.engine.Modules().OpenModule(leaving, m, enginetest.MustModuleVersion(t, "0.1.0"))
		left <- err
	}()
	time.Sleep(10 * time.Millisecond)
	leave()
	select {
	case err := <-left:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the caller that left: %v, want its context's cancellation", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the caller that left was still waiting a minute later")
	}

	close(src.release)
	for range versions {
		if err := <-errs; err != nil {
			t.Errorf("a module version asked while the slots were taken: %v", err)
		}
	}
	if src.most > slots {
		t.Errorf("%d module sources were asked at once, want %d at most", src.most, slots)
	}
	if n := src.asked.Load(); n != versions {
		t.Errorf("the sources were asked %d times, want %d (once a version)", n, versions)
	}
	if n := met.waiting.Load(); n != 0 {
		t.Errorf("%d fetches still counted as waiting", n)
	}
}
