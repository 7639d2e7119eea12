package manifest

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apparentlymart/go-versions/versions"
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
				if _, err := (&Spec{}).ReadModuleDir(context.Background(), dir, filepath.Join(dir, sub), "module acme/app/aws 1.0.0"); err == nil {
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

// A module version constraint may spell its versions with a leading "v"
// ("v1.1.0", "~> v1.1"), as Terraform and OpenTofu read a module call's
// version (hashicorp/go-version) and as module registries list them:
// sync reads a configuration the clients accept, and a sync manifest or
// pins file may name a module version as its registry spells it. A
// provider's constraint with a "v" is refused, as the clients refuse it.
func TestModuleConstraintsWithV(t *testing.T) {
	list := versions.List{versions.MustParseVersion("1.0.0"), versions.MustParseVersion("1.1.0"), versions.MustParseVersion("2.0.0")}
	for c, want := range map[string]string{
		"v1.1.0":              "1.1.0",
		"= v1.1.0":            "1.1.0",
		"~> v1.0":             "1.1.0",
		">= v1.0.0, < v2.0.0": "1.1.0",
		"<v1.1.0":             "1.0.0",
	} {
		dir := writeFiles(t, map[string]string{
			"main.tf":  "module \"next\" {\n  source  = \"acme/next/aws\"\n  version = \"" + c + "\"\n}\n",
			"sync.hcl": "module \"acme/next/aws\" {\n  versions = [\"" + c + "\"]\n}\n",
		})
		md, err := (&Spec{}).ReadModuleDir(context.Background(), dir, dir, "module acme/app/aws 1.0.0")
		calls := md.Modules
		if err != nil || len(calls) != 1 || len(calls[0].Selections) != 1 {
			t.Errorf("module call version %q: %+v, %v", c, calls, err)
		} else if got := calls[0].Selections[0].Select(list); len(got) == 0 || got[0].String() != want {
			t.Errorf("module call version %q selects %v, want %s first", c, got, want)
		}
		spec, err := Load(filepath.Join(dir, "sync.hcl"))
		if err != nil || len(spec.Modules) != 1 {
			t.Errorf("sync manifest module versions %q: %v", c, err)
		} else if got := spec.Modules[0].Selections[0].Select(list); len(got) == 0 || got[0].String() != want {
			t.Errorf("sync manifest module versions %q selects %v, want %s first", c, got, want)
		}
		pins, _, err := NewPinsDir(dir).Pins()
		if err != nil || len(pins.Modules["registry.terraform.io/acme/next/aws"]) != 1 || !pins.Modules["registry.terraform.io/acme/next/aws"][0].Set.Has(versions.MustParseVersion(want)) {
			t.Errorf("module pin %q: %+v, %v", c, pins, err)
		}
	}
	for _, c := range []string{"vv1.1.0", "V1.1.0", "v", "~> v"} {
		dir := writeFiles(t, map[string]string{"sync.hcl": "module \"acme/next/aws\" {\n  versions = [\"" + c + "\"]\n}\n"})
		if _, err := Load(filepath.Join(dir, "sync.hcl")); err == nil {
			t.Errorf("module versions %q: no error", c)
		}
	}
	dir := writeFiles(t, map[string]string{"sync.hcl": "provider \"hashicorp/aws\" {\n  versions = [\"v1.1.0\"]\n}\n"})
	if _, err := Load(filepath.Join(dir, "sync.hcl")); err == nil || !strings.Contains(err.Error(), "sync.hcl:2") {
		t.Errorf("provider versions v1.1.0: %v, want an error at sync.hcl:2", err)
	}
}
