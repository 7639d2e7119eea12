package records

import (
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

// TestModuleKeysUnchanged: the keys of a module version's record and
// zip, made of the parsed version, are byte for byte the keys earlier
// releases wrote (they rendered the version without its leading "v", in
// semver's canonical form), so that a cache, a bundle or a shared bucket
// written by them is read as it is; every spelling of one version gives
// the one key.
func TestModuleKeysUnchanged(t *testing.T) {
	t.Parallel()
	m := addrs.Module{Hostname: "registry.example.com", Namespace: "acme", Name: "vpc", System: "aws"}
	for spelled, want := range map[string]string{
		"1.1.0":            "1.1.0",
		"v1.1.0":           "1.1.0",
		"1.1":              "1.1.0",
		"v2.0.0-rc.1":      "2.0.0-rc.1",
		"1.0.0-beta.2+b.7": "1.0.0-beta.2+b.7",
	} {
		v, err := addrs.ParseModuleVersion(spelled)
		if err != nil {
			t.Fatalf("%s: %v", spelled, err)
		}
		if got := ModuleRecordKey(m, v); got != "module/registry.example.com/acme/vpc/aws/"+want {
			t.Errorf("ModuleRecordKey of %s = %q, want the key of earlier releases, module/registry.example.com/acme/vpc/aws/%s", spelled, got, want)
		}
		if got := ModuleZipKey(m, v); got != "modzip/registry.example.com/acme/vpc/aws/"+want {
			t.Errorf("ModuleZipKey of %s = %q, want modzip/registry.example.com/acme/vpc/aws/%s", spelled, got, want)
		}
	}
}

// TestOriginSpelling: a list answers, for a version, the spelling the
// origin listed it in (what the origin's download answer is asked with).
func TestOriginSpelling(t *testing.T) {
	t.Parallel()
	list := &ModuleVersionList{Versions: []string{"latest", "v1.1.0", "1.0.0", "v2.0.0-rc.1"}}
	for asked, want := range map[string]string{"1.1.0": "v1.1.0", "v1.0.0": "1.0.0", "2.0.0-rc.1": "v2.0.0-rc.1"} {
		v, err := addrs.ParseModuleVersion(asked)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := list.OriginSpelling(v); !ok || got != want {
			t.Errorf("OriginSpelling(%s) = %q, %v; want %q", asked, got, ok, want)
		}
	}
	if got, ok := list.OriginSpelling(mustVersion(t, "1.2.0")); ok {
		t.Errorf("OriginSpelling of a version not listed = %q, want none", got)
	}
}

// TestOriginSpellingTheClientsAskIn: a list that names a version in two
// spellings ("v1.0.0" first, then "1.0.0": a registry publishing from
// two tags) answers the one Terraform and OpenTofu ask the origin's
// download in, the canonical form: the mirror asks the origin what a
// direct install asks, and serves the package a direct install gets.
func TestOriginSpellingTheClientsAskIn(t *testing.T) {
	t.Parallel()
	list := &ModuleVersionList{Versions: []string{"v1.0.0", "1.0.0", "v1.1", "1.1.0", "v2.0"}}
	for asked, want := range map[string]string{"1.0.0": "1.0.0", "v1.0.0": "1.0.0", "1.1.0": "1.1.0", "2.0.0": "v2.0"} {
		v, err := addrs.ParseModuleVersion(asked)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := list.OriginSpelling(v); !ok || got != want {
			t.Errorf("OriginSpelling(%s) = %q, %v; want %q", asked, got, ok, want)
		}
	}
}
