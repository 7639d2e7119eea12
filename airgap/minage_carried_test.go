package airgap

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// A CLI version an earlier export carried, released long ago and let
// through by a minimum release age while cached, is kept by the next
// incremental export once the cache no longer holds it: the cache can no
// longer date it, and an export asks no origin, so its age stands as the
// earlier export judged it.
func TestIncrementalExportKeepsUncachedCLIUnderMinimumAge(t *testing.T) {
	_, side := cachedCLI(t)
	ctx := context.Background()
	cli, out, key := exportedFrom(t, side)
	side.Engine.SetPolicy(enginetest.DecodePolicy(t, "minimum_release_age = \"72h\"\n"))
	var reports []string
	sum, err := Export(ctx, cli, servedBy(t, side.Engine, nil), cli, Selection{}, out, key, func(s string) { reports = append(reports, s) })
	if err != nil || sum.Held != 0 {
		t.Fatalf("cached, old, under a 72h age: %+v %v %q", sum, err, reports)
	}
	if err := side.Releases.Inventory().RemoveVersion(releases.Kind, releases.Address(releases.OpenTofu, "tofu"), "1.8.0"); err != nil {
		t.Fatal(err)
	}
	reports = nil
	sum, err = Export(ctx, cli, servedBy(t, side.Engine, nil), cli, Selection{}, out, key, func(s string) { reports = append(reports, s) })
	if err != nil || sum.Held != 0 || !fileExists(filepath.Join(out, filepath.FromSlash(tofuRelDir), tofuZipName)) {
		t.Errorf("old tofu 1.8.0, no longer cached, under a 72h age: %+v %v %q; want it kept", sum, err, reports)
	}
}

// Provider and module versions an earlier export carried, exported again
// from a sealed cache that never held them (another mirror's export),
// are kept under a minimum release age that cannot date them there.
func TestIncrementalExportKeepsUncachedPackagesUnderMinimumAge(t *testing.T) {
	_, p, out, key := exportedNetAndTarball(t)
	ctx := context.Background()
	sealed := newEngine(t, nil) // offline, as tfmirror export opens the data directory
	sealed.SetPolicy(enginetest.DecodePolicy(t, "minimum_release_age = \"72h\"\n"))
	var reports []string
	sum, err := Export(ctx, sealed, servedBy(t, sealed, nil), nil, Selection{}, out, key, func(s string) { reports = append(reports, s) })
	archive := filepath.Join(out, p.Hostname.ForDisplay(), p.Namespace, p.Type, "terraform-provider-net_1.0.0_linux_amd64.zip")
	if err != nil || sum.Held != 0 || !fileExists(archive) {
		t.Errorf("under a 72h age, from a sealed cache without them: %+v %v %q; want them kept", sum, err, reports)
	}
}
