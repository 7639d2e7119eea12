package modules_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"testing"

	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/oci"
)

// A module version's manifest names its zip, resolves by its digest, and
// keeps its digest after the zip's blob is evicted and after a restart;
// its layer's digest opens the zip; a digest never handed out is unknown.
func TestModuleManifestStable(t *testing.T) {
	t.Parallel()
	needGit(t)
	dir := filepath.Join(t.TempDir(), "cache")
	h := harness.New(t, harness.Options{CacheDir: dir})
	o := h.Origin
	if _, err := o.AddGitRepo("vpc", map[string][]byte{"main.tf": []byte("# vpc\n")}, "v1.0.0"); err != nil {
		t.Fatal(err)
	}
	o.AddModule("acme", "vpc", "aws", "1.0.0", "git::"+o.GitURL("vpc")+"?ref=v1.0.0")
	ctx := context.Background()
	mods := h.Engine.Modules().Zips()
	doc, err := mods.ModuleManifest(ctx, harness.Module, enginetest.MustModuleVersion(t, "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	var man ocispec.Manifest
	if err := json.Unmarshal(doc.Bytes, &man); err != nil {
		t.Fatal(err)
	}
	if man.ArtifactType != oci.ArtifactTypeModulePackage || len(man.Layers) != 1 || man.Layers[0].MediaType != "archive/zip" ||
		man.Layers[0].Annotations[ocispec.AnnotationTitle] != "vpc-aws-1.0.0.zip" {
		t.Fatalf("manifest: %s", doc.Bytes)
	}
	layer := man.Layers[0].Digest
	z, err := mods.ModuleBlob(ctx, harness.Module, layer)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(z.Content())
	z.Close()
	if digest.FromBytes(b) != layer || int64(len(b)) != man.Layers[0].Size {
		t.Errorf("the layer's digest opens other bytes")
	}
	if got, err := mods.ModuleDocument(ctx, harness.Module, doc.Digest); err != nil || string(got.Bytes) != string(doc.Bytes) {
		t.Errorf("by digest: %v", err)
	}
	for _, d := range []digest.Digest{digest.FromString("other"), doc.Digest} {
		if _, err := mods.ModuleBlob(ctx, harness.Module, d); !errors.Is(err, records.ErrDigestUnknown) {
			t.Errorf("blob %s: %v, want unknown", d, err)
		}
	}
	if _, err := mods.ModuleDocument(ctx, harness.Module, layer); !errors.Is(err, records.ErrDigestUnknown) {
		t.Errorf("the layer's digest as a manifest: %v, want unknown", err)
	}

	if err := cachetest.DeleteBlob(h.Store, layer.Encoded()); err != nil {
		t.Fatal(err)
	}
	h.Stop()
	o.ResetHits()
	h.Start(harness.Options{CacheDir: dir, Config: harness.Config{Offline: true}})
	mods = h.Engine.Modules().Zips()
	if again, err := mods.ModuleManifest(ctx, harness.Module, enginetest.MustModuleVersion(t, "1.0.0")); err != nil || again.Digest != doc.Digest {
		t.Errorf("after a restart: %v, %v; want %s", again.Digest, err, doc.Digest)
	}
	if got, err := mods.ModuleDocument(ctx, harness.Module, doc.Digest); err != nil || got.Digest != doc.Digest {
		t.Errorf("by digest after a restart: %v", err)
	}
	z, err = mods.ModuleBlob(ctx, harness.Module, layer)
	if err != nil {
		t.Fatalf("the evicted zip, sealed: %v", err)
	}
	b, _ = io.ReadAll(z.Content())
	z.Close()
	if digest.FromBytes(b) != layer {
		t.Errorf("the zip made again differs")
	}
	if n := o.TotalHits(); n != 0 {
		t.Errorf("%d origin requests, sealed", n)
	}
}

// A module manifest digest one replica handed out resolves on another
// sharing the tier, sealed, with an empty cache, by digest first (as a
// client holding the digest asks), and so does its layer; both give the
// first replica's bytes.
func TestModuleManifestOnSecondReplica(t *testing.T) {
	t.Parallel()
	needGit(t)
	tier := harness.NewMemTier()
	first := harness.New(t, harness.Options{Config: harness.Config{Shared: tier}})
	o := first.Origin
	if _, err := o.AddGitRepo("vpc", map[string][]byte{"main.tf": []byte("# shared\n")}, "v1.0.0", "v1.1.0"); err != nil {
		t.Fatal(err)
	}
	o.AddModule("acme", "vpc", "aws", "1.0.0", "git::"+o.GitURL("vpc")+"?ref=v1.0.0")
	o.AddModule("acme", "vpc", "aws", "1.1.0", "git::"+o.GitURL("vpc")+"?ref=v1.1.0")
	ctx := context.Background()
	doc, err := first.Engine.Modules().Zips().ModuleManifest(ctx, harness.Module, enginetest.MustModuleVersion(t, "1.1.0"))
	if err != nil {
		t.Fatal(err)
	}
	var man ocispec.Manifest
	if err := json.Unmarshal(doc.Bytes, &man); err != nil {
		t.Fatal(err)
	}
	first.WaitIdle() // records go to the tier in the background
	o.ResetHits()
	second := &harness.Harness{T: t, Origin: o}
	second.Start(harness.Options{Config: harness.Config{Shared: tier, Offline: true}})
	mods := second.Engine.Modules().Zips()
	got, err := mods.ModuleDocument(ctx, harness.Module, doc.Digest)
	if err != nil || string(got.Bytes) != string(doc.Bytes) {
		t.Fatalf("by digest on the second replica: %v", err)
	}
	z, err := mods.ModuleBlob(ctx, harness.Module, man.Layers[0].Digest)
	if err != nil {
		t.Fatalf("the layer on the second replica: %v", err)
	}
	b, _ := io.ReadAll(z.Content())
	z.Close()
	if digest.FromBytes(b) != man.Layers[0].Digest {
		t.Error("the second replica's zip differs")
	}
	if _, err := mods.ModuleDocument(ctx, harness.Module, digest.FromString("none")); !errors.Is(err, records.ErrDigestUnknown) {
		t.Errorf("a digest never handed out: %v", err)
	}
	if n := o.TotalHits(); n != 0 {
		t.Errorf("%d origin requests from the sealed replica", n)
	}
}

// A blob asked for by digest is the bytes of that digest, or refused:
// once the package a zip was made of is refused by today's rules and its
// zip made again of the package fetched again (other bytes, another
// digest), the first zip's digest does not open the new zip, which a door
// would send with a Docker-Content-Digest the bytes do not have.
func TestModuleBlobNeverOpensAnotherDigest(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{})
	_, zsha := earlierDotGIT(t, h, records.ProvenanceOrigin)
	ctx := context.Background()
	d := digest.NewDigestFromEncoded(digest.SHA256, zsha)

	z, err := h.Engine.Modules().Zips().ModuleBlob(ctx, harness.Module, d)
	if err != nil {
		return // refused: the digest names a zip no longer served
	}
	b, _ := io.ReadAll(z.Content())
	z.Close()
	if got := digest.FromBytes(b); got != d || z.Record.SHA256 != d.Encoded() {
		t.Errorf("blob %s opened a zip of digest %s (record %s)", d, got, z.Record.SHA256)
	}
}
