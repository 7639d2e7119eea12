package mirror

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
	"github.com/tfmirror/tfmirror/v2/internal/workgroup"
)

// panicsOnPlatform panics, as a bug met on an origin's answer would,
// when asked for the package of the platform named, while armed.
type panicsOnPlatform struct {
	Origin
	platform string
	armed    *atomic.Bool
}

func (o panicsOnPlatform) Package(ctx context.Context, p addrs.Provider, version string, pl addrs.Platform) (*discovery.Package, error) {
	if o.armed.Load() && pl.String() == o.platform {
		var m map[string]int
		m[pl.String()]++ // assignment to entry in nil map
	}
	return o.Origin.Package(ctx, p, version, pl)
}

// A version's platforms are asked of the origin a few at once, on
// goroutines of their own. One of them that panics (a bug of the
// mirror's, where no handler's recovery reaches) fails the request for
// the version, as a handler's panic fails its request: it does not end
// the process. The panic is logged once at error with its stack and the
// version, nothing is kept of the failed lookup, and the version is
// served when asked again.
func TestPlatformLookupThatPanicsFailsItsVersion(t *testing.T) {
	t.Parallel()
	var logged logbuf.Buffer
	armed := new(atomic.Bool)
	armed.Store(true)
	h := newHarness(t, harnessOptions{
		cfg: Config{Logger: slog.New(slog.NewTextHandler(&logged, nil))},
		wrapOrigin: func(o Origin) Origin {
			return panicsOnPlatform{Origin: o, platform: "windows_amd64", armed: armed}
		},
	})
	platforms := []string{"linux_amd64", "darwin_arm64", "windows_amd64"}
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)

	_, err := h.packages("1.0.0", platforms...)
	if !errors.Is(err, workgroup.ErrPanicked) {
		t.Fatalf("a version whose platform lookup panicked: %v, want workgroup.ErrPanicked", err)
	}
	out := logged.String()
	if n := strings.Count(out, "panicked"); n != 1 {
		t.Errorf("the panic is logged %d times, want once:\n%s", n, out)
	}
	for _, want := range []string{"level=ERROR", "version=1.0.0", "nil map", "panic_test.go"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log does not say %q:\n%s", want, out)
		}
	}

	armed.Store(false)
	pkg, err := h.packages("1.0.0", platforms...)
	if err != nil {
		t.Fatalf("the version asked again: %v", err)
	}
	if n := len(pkg.Archives); n != len(platforms) {
		t.Errorf("the version asked again has %d archives, want %d", n, len(platforms))
	}
}
