package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apparentlymart/go-versions/versions"
)

func writePin(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A subdirectory of the pins directory that is a symbolic link
// (pins/team-a -> /repos/team-a) is read as the directory it names: it
// was skipped, its lock files pinned nothing and the rules removed what
// they pin. A link back to a directory already read (a loop) is read once.
func TestPinsDirFollowsLinkedSubdirectories(t *testing.T) {
	base := t.TempDir()
	pins, repo := filepath.Join(base, "pins"), filepath.Join(base, "repos", "team-a")
	writePin(t, filepath.Join(repo, ".terraform.lock.hcl"), `provider "registry.terraform.io/hashicorp/aws" {
  version = "5.1.0"
  hashes  = []
}
`)
	writePin(t, filepath.Join(pins, "keep.hcl"), `provider "registry.terraform.io/hashicorp/random" {
  versions = ["3.6.0"]
}
`)
	if err := os.Symlink(repo, filepath.Join(pins, "team-a")); err != nil {
		t.Skip(err)
	}
	for _, loop := range []string{filepath.Join(pins, "self"), filepath.Join(repo, "up")} {
		if err := os.Symlink(pins, loop); err != nil {
			t.Fatal(err)
		}
	}
	got, changed, err := NewPinsDir(pins).Pins()
	if err != nil || !changed {
		t.Fatalf("changed %v, %v", changed, err)
	}
	aws := got.Providers["registry.terraform.io/hashicorp/aws"]
	if len(aws) != 1 || !aws[0].Set.Has(versions.MustParseVersion("5.1.0")) {
		t.Errorf("the lock file of a linked subdirectory: %+v", got.Providers)
	}
	if r := got.Providers["registry.terraform.io/hashicorp/random"]; len(r) != 1 {
		t.Errorf("a directory reached through a link loop was read %d times: %+v", len(r), got.Providers)
	}
}

// A linked subdirectory whose target is gone (an unmounted volume) is an
// error, as a pins directory that is gone is: read as no pins, it let the
// rules remove what it pinned.
func TestPinsDirDanglingLinkedSubdirectory(t *testing.T) {
	base := t.TempDir()
	pins := filepath.Join(base, "pins")
	writePin(t, filepath.Join(pins, "keep.hcl"), `provider "registry.terraform.io/hashicorp/random" {
  versions = ["3.6.0"]
}
`)
	if err := os.Symlink(filepath.Join(base, "gone"), filepath.Join(pins, "team-b")); err != nil {
		t.Skip(err)
	}
	if got, _, err := NewPinsDir(pins).Pins(); err == nil || !strings.Contains(err.Error(), "team-b") {
		t.Errorf("a dangling linked subdirectory: %v, pins %+v", err, got)
	}
}
