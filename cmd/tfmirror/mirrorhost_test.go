package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
)

// TestPublicURLHostRefusedAsModuleSource: the origin client the engine
// fetches module sources with knows the host of --public-url, and of the
// public URL a reload puts in force: a location there is refused as one
// pointing at this mirror, before any request, where the mirror asked
// itself, each answer chaining another request.
func TestPublicURLHostRefusedAsModuleSource(t *testing.T) {
	parts, _ := openOffline(t, "--data-dir", filepath.Join(t.TempDir(), "data"), "--public-url", "https://Mirror.Example.test/tfmirror/")
	defer parts.shutdown(context.Background())
	refused := func(location string) {
		t.Helper()
		_, _, err := parts.origin.OpenSource(context.Background(), "registry.terraform.io", location)
		if !errors.Is(err, modsource.ErrUnsupported) || !strings.Contains(err.Error(), "points at this mirror") {
			t.Errorf("OpenSource(%s): %v, want it refused as pointing at this mirror", location, err)
		}
	}
	refused("https://mirror.example.test/registry/x.tar.gz")
	parts.mirrorHost.set("https://other.example.test/") // as a reload's public URL
	refused("https://other.example.test:8443/x.tar.gz")
}
