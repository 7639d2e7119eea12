package airgap

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/oci"
)

// An OCI layout export from a sealed cache (tfmirror export run alone
// opens the cache sealed) writes a provider version with the platforms
// the cache holds, as it does online: the archives of the platforms it
// does not hold, whose sizes an origin without OpenTofu's package_size
// (registry.terraform.io) does not state and a sealed mirror cannot
// learn, are left out of its index, and do not fail the version.
func TestExportOCILayoutSealedWithPlatformsNotCached(t *testing.T) {
	// A network mirror pull as terraform makes it (VERSION.json, every
	// platform's package metadata, then one archive), or an archive
	// fetched alone (its platform's metadata only).
	for _, everyPlatform := range []bool{true, false} {
		t.Run(map[bool]string{true: "every platform's metadata", false: "one platform's metadata"}[everyPlatform], func(t *testing.T) {
			exportSealed(t, everyPlatform)
		})
	}
}

func exportSealed(t *testing.T, everyPlatform bool) {
	o := enginetest.StartOrigin(t, fakeorigin.Options{})
	o.AddProvider("acme", "net", []string{"1.0.0"}, []string{"linux_amd64", "darwin_arm64"})
	dir := filepath.Join(t.TempDir(), "cache")
	ctx := context.Background()
	p := addrs.Provider{Hostname: enginetest.OriginHost, Namespace: "acme", Type: "net"}
	v, err := addrs.ParseSemver("1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	var store *cache.Store
	open := func(offline bool) *mirror.Engine {
		t.Helper()
		store = enginetest.OpenStore(t, dir, cache.Options{})
		cfg := mirror.Config{AllowedOrigins: []string{enginetest.OriginHost}, Logger: enginetest.Logger(t), ScratchDir: t.TempDir(), Offline: offline}
		engine, err := mirror.New(cfg, enginetest.OriginClient(t, o), store)
		if err != nil {
			t.Fatal(err)
		}
		return engine
	}

	// Online: the linux_amd64 archive cached.
	engine := open(false)
	if everyPlatform {
		if _, err := engine.Package(ctx, p, v, nil); err != nil {
			t.Fatal(err)
		}
	}
	pl, _ := addrs.ParsePlatform("linux_amd64")
	a, err := engine.OpenArchive(ctx, p, v, pl)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, a)
	a.Close()
	mirror.WaitIdle(ctx, engine)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	engine.Shutdown(sctx)
	cancel()
	store.Close()

	// Sealed, as tfmirror export opens it.
	engine = open(true)
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		engine.Shutdown(sctx)
		store.Close()
	})
	side, names := ociLayoutParts(t, engine)
	out := filepath.Join(t.TempDir(), "layout")
	var reports []string
	sum, err := ExportOCILayout(ctx, engine, servedBy(t, engine, side), names, Selection{}, out, func(s string) { reports = append(reports, s) })
	if err != nil || sum.Failed != 0 || sum.Tags != 1 {
		t.Fatalf("sealed export: %+v, %v, %q; want 1.0.0 exported with linux_amd64", sum, err, reports)
	}
	repo := names.Provider(p)
	tag, ok := layoutIndex(t, out, repo)["1.0.0"]
	if !ok {
		t.Fatalf("no tag 1.0.0 in %s", repo)
	}
	var idx ocispec.Index
	if err := json.Unmarshal(layoutBlob(t, out, repo, tag.Digest), &idx); err != nil || len(idx.Manifests) != 1 || idx.Manifests[0].Platform.OS != "linux" {
		t.Fatalf("the index: %+v, %v; want linux_amd64 alone", idx, err)
	}
	checkManifestBlobs(t, out, repo, idx.Manifests[0].Digest)
}

// A sealed export keeps, in a version's tag, a platform an earlier
// export wrote into the layout, as an online one does
// (TestExportOCILayoutKeepsEarlierPlatforms): here darwin_arm64, exported
// online, stays in the tag when the sealed export selects linux_amd64.
func TestExportOCILayoutSealedKeepsEarlierPlatforms(t *testing.T) {
	o := enginetest.StartOrigin(t, fakeorigin.Options{})
	o.AddProvider("acme", "net", []string{"1.0.0"}, []string{"linux_amd64", "darwin_arm64"})
	dir := filepath.Join(t.TempDir(), "cache")
	ctx := context.Background()
	p := addrs.Provider{Hostname: enginetest.OriginHost, Namespace: "acme", Type: "net"}
	names, err := oci.NewNames("providers", "modules")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "layout")
	var door oci.Document
	for _, offline := range []bool{false, true} {
		store := enginetest.OpenStore(t, dir, cache.Options{})
		cfg := mirror.Config{AllowedOrigins: []string{enginetest.OriginHost}, Logger: enginetest.Logger(t), ScratchDir: t.TempDir(), Offline: offline}
		engine, err := mirror.New(cfg, enginetest.OriginClient(t, o), store)
		if err != nil {
			t.Fatal(err)
		}
		side, err := engine.NewOCI()
		if err != nil {
			t.Fatal(err)
		}
		pl := "linux_amd64"
		if !offline {
			pl = "darwin_arm64"
			cacheArchive(t, engine, p, "1.0.0", "linux_amd64")
			cacheArchive(t, engine, p, "1.0.0", "darwin_arm64")
			v, _ := addrs.ParseSemver("1.0.0")
			if door, err = side.Index(ctx, p, v); err != nil {
				t.Fatal(err)
			}
		}
		var reports []string
		sum, err := ExportOCILayout(ctx, engine, servedBy(t, engine, side), names, Selection{Platforms: []string{pl}}, out, func(s string) { reports = append(reports, s) })
		if err != nil || sum.Failed != 0 {
			t.Fatalf("export of %s (offline %v): %+v, %v, %q", pl, offline, sum, err, reports)
		}
		mirror.WaitIdle(ctx, engine)
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		engine.Shutdown(sctx)
		cancel()
		store.Close()
	}
	repo := names.Provider(p)
	tag := layoutIndex(t, out, repo)["1.0.0"]
	var idx ocispec.Index
	if err := json.Unmarshal(layoutBlob(t, out, repo, tag.Digest), &idx); err != nil || len(idx.Manifests) != 2 || tag.Digest != door.Digest {
		t.Fatalf("tag 1.0.0 after the sealed export: %s, %+v, %v; want the front door's index %s, of both platforms", tag.Digest, idx.Manifests, err, door.Digest)
	}
	for _, d := range idx.Manifests {
		checkManifestBlobs(t, out, repo, d.Digest)
	}
}
