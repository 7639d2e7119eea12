package manifest

import (
	"path/filepath"
	"strings"
	"testing"
)

// A version constraint with a number too large for 64 bits is refused
// with its file:line on every path that reads one: a pins file (read by
// serve), a sync manifest, a lock file, and the .tf files of a module
// sync fetched (a stranger's). The constraint parser panics on such a
// number; from the pins it would crash-loop serve, from a module end sync.
func TestOutOfRangeConstraints(t *testing.T) {
	const huge = "99999999999999999999"
	for _, c := range []string{huge, ">= " + huge + ".0.0", "~> 1." + huge, "= 1.0.0, < 2." + huge} {
		t.Run("pins", func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"keep.hcl": "provider \"hashicorp/aws\" {\n  versions = [\"" + c + "\"]\n}\n"})
			if _, _, err := NewPinsDir(dir).Pins(); err == nil || !strings.Contains(err.Error(), "keep.hcl:2") {
				t.Errorf("pins %q: %v, want an error at keep.hcl:2", c, err)
			}
		})
		t.Run("manifest", func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"m.hcl": "cli \"terraform\" {\n  versions = [\"" + c + "\"]\n}\n"})
			if _, err := Load(filepath.Join(dir, "m.hcl")); err == nil || !strings.Contains(err.Error(), "m.hcl:2") {
				t.Errorf("manifest %q: %v, want an error at m.hcl:2", c, err)
			}
		})
		t.Run("module", func(t *testing.T) {
			dir := writeFiles(t, map[string]string{
				"a/main.tf":     "module \"next\" {\n  source  = \"acme/next/aws\"\n  version = \"" + c + "\"\n}\n",
				"b/versions.tf": "terraform {\n  required_providers {\n    aws = { source = \"hashicorp/aws\", version = \"" + c + "\" }\n  }\n}\n",
			})
			for _, sub := range []string{"a", "b"} {
				if _, err := (&Spec{}).AddModuleDir(filepath.Join(dir, sub), "module acme/app/aws 1.0.0"); err == nil {
					t.Errorf("module %s %q: no error", sub, c)
				}
			}
		})
	}
	dir := writeFiles(t, map[string]string{LockFileName: "provider \"registry.terraform.io/hashicorp/aws\" {\n  version = \"" + huge + ".0.0\"\n}\n"})
	if _, err := Load(filepath.Join(dir, LockFileName)); err == nil || !strings.Contains(err.Error(), ":2") {
		t.Errorf("lock file: %v, want an error at line 2", err)
	}
}
