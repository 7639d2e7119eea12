package image

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestBuild assembles an index of two platforms twice from the same files
// and time, and checks that it is the same index, and what its amd64
// image holds: the binary (root's, 0755) and the data directory (the
// runtime user's), with the runtime configuration and the labels.
func TestBuild(t *testing.T) {
	dir := t.TempDir()
	bins := map[string]string{}
	for _, arch := range []string{"amd64", "arm64"} {
		p := filepath.Join(dir, arch)
		if err := os.WriteFile(p, []byte("binary for "+arch), 0o755); err != nil {
			t.Fatal(err)
		}
		bins["linux/"+arch] = p
	}
	opts := Options{Binaries: bins, Version: "2.0.0", Revision: "0123abcd", Source: "https://example.com/src", Created: time.Unix(1764352800, 0)}
	a, err := Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Errorf("two builds: %s, then %s", da, db)
	}
	out := filepath.Join(dir, "layout")
	if err := WriteLayout(out, a, opts.Version); err != nil {
		t.Fatal(err)
	}
	if _, err := layout.ImageIndexFromPath(out); err != nil {
		t.Fatal(err)
	}

	im, err := a.IndexManifest()
	if err != nil || len(im.Manifests) != 2 || im.Manifests[0].Platform.Architecture != "amd64" {
		t.Fatalf("index: %v %+v", err, im)
	}
	img, err := a.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != User || cf.Config.Entrypoint[0] != Binary || cf.Config.Labels["org.opencontainers.image.revision"] != "0123abcd" ||
		!cf.Created.Time.Equal(opts.Created) || cf.Architecture != "amd64" {
		t.Errorf("config %+v", cf)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %v %d, want the one of an empty base", err, len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	seen := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seen[h.Name] = h
		if h.Name == "usr/local/bin/tfmirror" {
			data, _ := io.ReadAll(tr)
			if string(data) != "binary for amd64" || h.Mode != 0o755 || h.Uid != 0 {
				t.Errorf("binary %q, mode %o, uid %d", data, h.Mode, h.Uid)
			}
		}
		if !h.ModTime.Equal(opts.Created) {
			t.Errorf("%s: time %v, want the commit's", h.Name, h.ModTime)
		}
	}
	if h := seen["var/lib/tfmirror/"]; h == nil || h.Uid != UID || h.Gid != UID {
		t.Errorf("data directory %+v, want it owned by %d", h, UID)
	}
	if seen["usr/local/bin/tfmirror"] == nil {
		t.Error("no binary in the layer")
	}
	if _, err := Build(Options{Binaries: map[string]string{"darwin/arm64": bins["linux/amd64"]}, Version: "2.0.0", Created: opts.Created}); err == nil {
		t.Error("a darwin binary was taken for the image")
	}
}
