package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// An origin listing a version as both 1.0 and 1.0.0, the packages being
// under 1.0.0 only, still installs.
func TestTerraformInitVersionListedInTwoSpellings(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{})
	e.origin.AddProvider("hashicorp", "null", []string{"1.0"}, nil)
	e.origin.AddProvider("hashicorp", "null", []string{"1.0.0"}, []string{"linux_amd64"})

	dir := writeConfig(t, map[string]string{"null": "hashicorp/null@1.0.0"})
	out, err := e.terraform(dir, "init", "-no-color")
	if err != nil {
		t.Fatalf("terraform init failed: %v\n%s", err, out)
	}
	plugin := filepath.Join(dir, ".terraform", "providers", "registry.terraform.io", "hashicorp", "null", "1.0.0", "linux_amd64", "terraform-provider-null_v1.0.0")
	if _, err := os.Stat(plugin); err != nil {
		t.Errorf("provider not installed: %v", err)
	}
}

// A signed archive without the provider executable is refused by the
// mirror before terraform gets all of it, and not cached.
func TestTerraformInitRefusesSignedArchiveWithoutExecutable(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{})
	e.origin.AddProvider("hashicorp", "null", []string{"3.2.0"}, []string{"linux_amd64"})
	// A zip holding the executable of another provider.
	e.origin.AddProvider("hashicorp", "other", []string{"3.2.0"}, []string{"linux_amd64"})
	zip := e.origin.Archive("hashicorp", "other", "3.2.0", "linux_amd64")
	e.origin.SetArchiveBytes("hashicorp", "null", "3.2.0", "linux_amd64", zip)
	sha := e.origin.SHA256("hashicorp", "null", "3.2.0", "linux_amd64")

	dir := writeConfig(t, map[string]string{"null": "hashicorp/null@3.2.0"})
	out, err := e.terraform(dir, "init", "-no-color")
	if err == nil {
		t.Fatalf("terraform init succeeded with an archive without the provider:\n%s", out)
	}
	if bytes.Contains([]byte(out), []byte("could not find executable")) {
		t.Errorf("terraform received the whole archive and looked for the executable in it:\n%s", out)
	}
	waitIdle(e.mirror.engine)
	if _, err := e.mirror.store.StatBlob(sha); !errors.Is(err, cache.ErrNotFound) {
		t.Errorf("the archive is cached: %v", err)
	}
}
