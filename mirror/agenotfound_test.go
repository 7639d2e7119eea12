package mirror

import (
	"errors"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// TestUnknownVersionNotFoundUnderReleaseAge: under a minimum release age,
// a version the origin does not list is not found, for its archive as
// for its package answer (VERSION.json, the registry's download answer),
// not held as a version whose release time is not known yet: the doors
// agree, and a client is told the version does not exist. A version the
// origin listed after the cached list was taken is found by the list
// taken again, and judged by its age.
func TestUnknownVersionNotFoundUnderReleaseAge(t *testing.T) {
	t.Parallel()
	clock := enginetest.NewFakeClock()
	clock.Set(time.Now().Truncate(time.Second))
	h := newHarness(t, harnessOptions{cfg: Config{Now: clock.Now}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
	h.origin.SetSignedAt(ns, typ, "1.0.0", clock.Now().Add(-400*24*time.Hour))
	h.engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	ctx := t.Context()
	pl := mustPlatform(t, "linux_amd64")

	a, err := h.engine.OpenArchive(ctx, h.provider(), mustVersion(t, "1.0.0"), pl)
	if err != nil {
		t.Fatalf("1.0.0, released long ago: %v", err)
	}
	a.Close()
	if _, err := h.engine.OpenArchive(ctx, h.provider(), mustVersion(t, "9.9.9"), pl); !errors.Is(err, records.ErrVersionNotFound) {
		t.Errorf("archive of 9.9.9, which the origin does not list: %v, want version not found", err)
	}
	if _, err := h.engine.Package(ctx, h.provider(), mustVersion(t, "9.9.9"), []addrs.Platform{pl}); !errors.Is(err, records.ErrVersionNotFound) {
		t.Errorf("package of 9.9.9: %v, want version not found", err)
	}

	// Published after the list was taken, an hour ago: held by its age.
	clock.Add(2 * time.Minute)
	h.origin.AddProvider(ns, typ, []string{"1.1.0"}, []string{"linux_amd64"})
	h.origin.SetSignedAt(ns, typ, "1.1.0", clock.Now().Add(-time.Hour))
	var perr *gate.PolicyError
	if _, err := h.engine.OpenArchive(ctx, h.provider(), mustVersion(t, "1.1.0"), pl); !errors.As(err, &perr) || perr.Verdict.AvailableAt.IsZero() ||
		perr.Verdict.AvailableAt.After(clock.Now().Add(72*time.Hour)) {
		t.Errorf("archive of 1.1.0, signed an hour ago: %v, want held by its age, until a time known", err)
	}
}
