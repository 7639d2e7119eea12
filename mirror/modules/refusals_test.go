package modules_test

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// A module package refused for what its source gave (here, over
// --module-max-bytes) is refused again within --not-found-ttl with
// nothing downloaded: a client retrying it costs the source host one
// download per period, not one per request; once the period ended, the
// source is asked again.
func TestModuleRefusalRemembered(t *testing.T) {
	t.Parallel()
	clock := enginetest.NewFakeClock()
	limits := modsource.Limits{MaxDownloadBytes: 1 << 10, MaxTreeBytes: 1 << 20, MaxEntries: 100}
	h := harness.New(t, harness.Options{Config: harness.Config{ScratchDir: t.TempDir(), ModuleLimits: limits,
		NotFoundTTL: time.Minute, Now: clock.Now}})
	o := h.Origin
	noise := make([]byte, 8<<10) // incompressible: the package is over the limit
	rand.Read(noise)
	o.AddTarball("big.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# m\n"), "blob.bin": noise}))
	o.AddModule("acme", "tarball", "aws", "0.1.0", o.TarballURL("big.tar.gz"))
	ctx := context.Background()
	v := enginetest.MustModuleVersion(t, "0.1.0")
	for i := range 5 {
		_, err := h.Engine.Modules().OpenModule(ctx, harness.TarballModule, v)
		if !errors.As(err, new(*modsource.LimitError)) {
			t.Fatalf("open %d: %v, want the limit's refusal", i, err)
		}
	}
	if n := o.Hits(fakeorigin.Tarball); n != 1 {
		t.Errorf("the source's package downloaded %d times for five requests within the period, want once", n)
	}
	clock.Add(time.Minute)
	if _, err := h.Engine.Modules().OpenModule(ctx, harness.TarballModule, v); !errors.As(err, new(*modsource.LimitError)) {
		t.Fatalf("after the period: %v", err)
	}
	if n := o.Hits(fakeorigin.Tarball); n != 2 {
		t.Errorf("after the period the package was downloaded %d times in all, want twice", n)
	}
}

// A package its zip cannot hold (a link to a directory holding it) is
// not unpacked again for each request of the zip within --not-found-ttl:
// the refusal made for the first is the answer to the next.
func TestModuleZipRefusalRemembered(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{Config: harness.Config{NotFoundTTL: time.Minute}})
	o := h.Origin
	o.AddTarball("vpc.tar.gz", linkLoopPackage(t))
	o.AddModule("acme", "vpc", "aws", "1.0.0", o.TarballURL("vpc.tar.gz"))
	_, _, first := readModuleZip(t, h, "1.0.0")
	_, _, again := readModuleZip(t, h, "1.0.0")
	if !errors.Is(first, modsource.ErrLinkLoop) || again != first {
		t.Errorf("the zip asked twice: %v, then %v; want the first refusal, remembered", first, again)
	}
}

// A module version whose package its source no longer serves (a 404 for
// the tarball) is refused again within --not-found-ttl without a second
// download: ten requests cost the source host one. Each request still
// asks the registry for the version's download location, once, as a
// client installing without the mirror does before each install: the
// location the record keeps may be one that expired (a pre-signed URL),
// and a location the registry gives anew within the period is fetched
// from at once, not refused for the rest of the period on the word of
// the old one.
func TestModuleGonePackageAsksTheLocationOncePerRequest(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{Config: harness.Config{NotFoundTTL: time.Minute}})
	o := h.Origin
	o.AddModule("acme", "vpc", "aws", "1.0.0", o.TarballURL("gone.tar.gz"))
	const requests = 10
	for i := range requests {
		if _, _, err := h.ReadModule("1.0.0"); err == nil {
			t.Fatalf("request %d: a package read from a location that does not serve", i)
		}
	}
	t.Logf("%d requests: %d download locations, %d tarball requests", requests, o.Hits(fakeorigin.ModuleDownload), o.Hits(fakeorigin.Tarball))
	if n := o.Hits(fakeorigin.Tarball); n != 1 {
		t.Errorf("%d requests within the period made %d tarball requests, want one", requests, n)
	}
	// The first request asks for the location twice: for the record, and
	// again once its fetch failed; each later one asks once.
	if n := o.Hits(fakeorigin.ModuleDownload); n > requests+1 {
		t.Errorf("%d requests asked the registry for the location %d times, want at most %d", requests, n, requests+1)
	}
	// The registry gives another location within the period: fetched.
	o.AddTarball("moved.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# m\n")}))
	o.AddModule("acme", "vpc", "aws", "1.0.0", o.TarballURL("moved.tar.gz"))
	if _, _, err := h.ReadModule("1.0.0"); err != nil {
		t.Errorf("the registry's new location within the period: %v", err)
	}
}
