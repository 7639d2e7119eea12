package manifest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/apparentlymart/go-versions/versions"
)

// A pins directory given as a symbolic link to a directory (an
// operator's /etc/tfmirror/pins -> /srv/pins) is read as the directory
// it names: read as a link, it pinned nothing, and the rules removed
// what its files pin.
func TestPinsDirThroughASymlink(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(real, "keep.hcl"), []byte(`provider "registry.terraform.io/hashicorp/aws" {
  versions = ["5.1.0"]
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "pins")
	if err := os.Symlink(real, link); err != nil {
		t.Skip(err)
	}
	pins, changed, err := NewPinsDir(link).Pins()
	if err != nil || !changed {
		t.Fatalf("changed %v, %v", changed, err)
	}
	sels := pins.Providers["registry.terraform.io/hashicorp/aws"]
	if len(sels) != 1 || !sels[0].Set.Has(versions.MustParseVersion("5.1.0")) {
		t.Fatalf("the pins of a directory named through a symbolic link: %+v", pins.Providers)
	}
}

// A pins directory that is a symbolic link to nothing (its target
// unmounted), or a file, is an error: read as a directory without pins,
// it let the rules remove every version pinned before.
func TestPinsDirNotADirectory(t *testing.T) {
	base := t.TempDir()
	dangling := filepath.Join(base, "pins")
	if err := os.Symlink(filepath.Join(base, "gone"), dangling); err != nil {
		t.Skip(err)
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{dangling, file} {
		if pins, _, err := NewPinsDir(dir).Pins(); err == nil {
			t.Errorf("%s: no error, pins %+v", dir, pins)
		}
	}
}
