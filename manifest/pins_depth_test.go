package manifest

import (
	"path/filepath"
	"strings"
	"testing"
)

// Files nested deeper than maxPinDepth are not read, and the pins say so
// (retention logs it): they were skipped without a word.
func TestPinsDirTooDeep(t *testing.T) {
	pins := t.TempDir()
	deep := pins
	for i := 0; i <= maxPinDepth; i++ {
		deep = filepath.Join(deep, "d")
	}
	writePin(t, filepath.Join(deep, "x.lock.hcl"), `provider "registry.terraform.io/hashicorp/aws" {
  version = "5.1.0"
  hashes  = []
}
`)
	writePin(t, filepath.Join(filepath.Dir(deep), "y.lock.hcl"), `provider "registry.terraform.io/hashicorp/random" {
  version = "3.6.0"
  hashes  = []
}
`)
	got, changed, err := NewPinsDir(pins).Pins()
	if err != nil || !changed {
		t.Fatalf("changed %v, %v", changed, err)
	}
	if len(got.Providers["registry.terraform.io/hashicorp/random"]) != 1 {
		t.Errorf("a file at the deepest level read: %+v", got.Providers)
	}
	if len(got.Providers["registry.terraform.io/hashicorp/aws"]) != 0 {
		t.Errorf("a file deeper than %d read: %+v", maxPinDepth, got.Providers)
	}
	if !strings.Contains(got.Skipped, deep) {
		t.Errorf("the directory not read is not named: %q", got.Skipped)
	}
}
