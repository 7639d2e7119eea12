package mirror

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
)

// heldOrigin holds every package request until the test releases it or
// the request's context is done, and counts the requests under way.
type heldOrigin struct {
	Origin
	entered  chan struct{}
	release  chan struct{}
	inFlight atomic.Int64
}

func (o *heldOrigin) Package(ctx context.Context, p addrs.Provider, version string, pl addrs.Platform) (*discovery.Package, error) {
	o.inFlight.Add(1)
	defer o.inFlight.Add(-1)
	o.entered <- struct{}{}
	select {
	case <-o.release:
		return nil, discovery.ErrNotFound
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fetchPackageMeta's requests to the origin do not outlive it, even when it
// fails on a platform name after others were asked for: when it returns,
// none is running.
func TestFetchPackageMetaLeavesNoRequestRunning(t *testing.T) {
	t.Parallel()
	held := &heldOrigin{release: make(chan struct{})}
	h := newHarness(t, harnessOptions{wrapOrigin: func(o Origin) Origin { held.Origin = o; return held }})
	names := []string{"linux_amd64", "linux_arm64", "darwin_amd64", "darwin_arm64", "windows_amd64", "not-a-platform"}
	held.entered = make(chan struct{}, len(names))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	returned := make(chan error, 1)
	go func() {
		_, _, err := h.engine.records.fetchPackageMeta(ctx, h.provider(), "1.0.0", names)
		returned <- err
	}()
	for entered := 0; ; {
		select {
		case err := <-returned:
			if err == nil {
				t.Fatal("fetchPackageMeta accepted an invalid platform name")
			}
			if n := held.inFlight.Load(); n != 0 {
				t.Errorf("%d origin requests still running after fetchPackageMeta returned (%v)", n, err)
			}
			return
		case <-held.entered:
			// Every slot is taken: let one request end, so that
			// fetchPackageMeta can get on to the invalid name.
			if entered++; entered == packageFetchConcurrency {
				held.release <- struct{}{}
			}
		}
	}
}
