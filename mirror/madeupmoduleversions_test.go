package mirror

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// A client naming versions of a module that its version list, as the
// origin answered it lately, does not have costs the origin no request
// each: they are not found without asking for their download, as a
// provider's are, and the list is fetched again at most once a minute
// for a release newer than it, which is then found.
func TestMadeUpModuleVersionsAskNoOrigin(t *testing.T) {
	t.Parallel()
	clock := enginetest.NewFakeClock()
	h := newHarness(t, harnessOptions{cfg: Config{Now: clock.Now, VersionsTTL: time.Hour}})
	mod := addrs.Module{Hostname: originHost, Namespace: ns, Name: "vpc", System: "aws"}
	h.origin.AddTarball("vpc.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc\n")}))
	h.origin.AddModule(ns, "vpc", "aws", "1.0.0", h.origin.TarballURL("vpc.tar.gz"))
	mods, ctx := h.engine.Modules(), t.Context()
	if _, _, err := mods.ModuleVersions(ctx, mod); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		v := enginetest.MustModuleVersion(t, fmt.Sprintf("9.0.%d", i))
		if _, err := mods.ModuleLocation(ctx, mod, v); !errors.Is(err, discovery.ErrNotFound) {
			t.Fatalf("made-up version %v: %v, want not found", v, err)
		}
		clock.Add(time.Second) // 50 s in all: within a minute of the list
	}
	if n := h.origin.Hits(fakeorigin.ModuleDownload); n != 0 {
		t.Fatalf("the origin was asked for %d made-up versions' downloads, want none", n)
	}
	if n := h.origin.Hits(fakeorigin.ModuleVersions); n != 1 {
		t.Fatalf("the origin was asked for the version list %d times, want 1", n)
	}
	if _, err := mods.ModuleLocation(ctx, mod, enginetest.MustModuleVersion(t, "1.0.0")); err != nil {
		t.Fatalf("1.0.0, listed: %v", err)
	}

	// A release newer than the list: found once the list is a minute old.
	h.origin.AddModule(ns, "vpc", "aws", "1.1.0", h.origin.TarballURL("vpc.tar.gz"))
	clock.Add(15 * time.Second) // 65 s after the list (the cache dates it by its own clock, to the second)
	if _, err := mods.ModuleLocation(ctx, mod, enginetest.MustModuleVersion(t, "1.1.0")); err != nil {
		t.Fatalf("1.1.0, published since the list: %v", err)
	}
	if n := h.origin.Hits(fakeorigin.ModuleVersions); n != 2 {
		t.Fatalf("the origin was asked for the version list %d times, want 2", n)
	}
	clock.Set(time.Now()) // the cache dates the list by its own clock: the engine's put back to it
	for i := range 50 {
		v := enginetest.MustModuleVersion(t, fmt.Sprintf("9.1.%d", i))
		if _, err := mods.ModuleLocation(ctx, mod, v); !errors.Is(err, discovery.ErrNotFound) {
			t.Fatalf("made-up version %v: %v, want not found", v, err)
		}
	}
	if n := h.origin.Hits(fakeorigin.ModuleVersions); n != 2 {
		t.Fatalf("the origin was asked for the version list %d times, want 2 (no more within the minute)", n)
	}
	if n := h.origin.Hits(fakeorigin.ModuleDownload); n != 2 {
		t.Fatalf("the origin was asked for %d downloads, want 2 (the versions it lists)", n)
	}

	// A module the origin does not have: its versions are not asked for.
	typo := addrs.Module{Hostname: originHost, Namespace: ns, Name: "typo", System: "aws"}
	for i := range 20 {
		v := enginetest.MustModuleVersion(t, fmt.Sprintf("1.0.%d", i))
		if _, err := mods.ModuleLocation(ctx, typo, v); !errors.Is(err, discovery.ErrNotFound) {
			t.Fatalf("made-up module: %v, want not found", err)
		}
	}
	if n := h.origin.Hits(fakeorigin.ModuleDownload); n != 2 {
		t.Fatalf("the origin was asked for %d downloads, want 2 (none of a module it does not list)", n)
	}
}
