package policy

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A deny_version refuses a release whatever build metadata the origin
// gives it: "1.1.0+build" is release 1.1.0 (semantic versioning gives
// them one precedence), so a deny naming 1.1.0, exactly or in a range,
// refuses 1.1.0+build and 1.1.0+other too, and a deny written with build
// metadata refuses the release it names. An exemption from the minimum
// release age, which lets a version through, stays exact: it does not
// reach another build of the release.
func TestDenyVersionBuildMetadata(t *testing.T) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	young := Release{At: now, Known: true}
	for _, c := range []struct {
		versions string
		denied   []string
		allowed  []string
	}{
		{"1.1.0", []string{"1.1.0", "1.1.0+build", "1.1.0+other", "1.1.0+b.1"}, []string{"1.1.1", "1.1.1+build", "1.1.0-rc1"}},
		{"= 1.1.0", []string{"1.1.0", "1.1.0+build"}, []string{"1.1.1+build"}},
		{"= 1.1.0+build", []string{"1.1.0", "1.1.0+build", "1.1.0+other"}, []string{"1.1.1"}},
		{"= 1.1.0-rc1", []string{"1.1.0-rc1", "1.1.0-rc1+build"}, []string{"1.1.0", "1.1.0-RC1", "1.1.0-rc.1"}},
		{">= 1.0.0, <= 1.1.0", []string{"1.1.0+build", "1.0.0+x"}, []string{"1.1.1+build"}},
		{"!= 1.1.0", []string{"1.2.0+build"}, []string{"1.1.0", "1.1.0+build"}},
		{"~> 1.1.0", []string{"1.1.5+build"}, []string{"1.2.0+build"}},
	} {
		p := mustDecode(t, fmt.Sprintf("policy {\n  deny_version \"registry.test/a/b\" {\n    versions = %q\n    reason = \"r\"\n  }\n}", c.versions))
		for _, kind := range []Kind{Provider, Module} {
			addr := "registry.test/a/b"
			if kind == Module {
				p = mustDecode(t, fmt.Sprintf("policy {\n  deny_version \"registry.test/a/b/c\" {\n    versions = %q\n    reason = \"r\"\n  }\n}", c.versions))
				addr = "registry.test/a/b/c"
			}
			for _, v := range c.denied {
				if got := p.Version(kind, addr, v, young, now); got.Allowed || got.Rule != RuleDenyVersion {
					t.Errorf("%s deny %q on %s: %+v, want refused", kind, c.versions, v, got)
				}
			}
			for _, v := range c.allowed {
				if got := p.Version(kind, addr, v, young, now); !got.Allowed {
					t.Errorf("%s deny %q on %s: %+v, want allowed", kind, c.versions, v, got)
				}
			}
		}
	}
	p := mustDecode(t, "policy {\n  minimum_release_age = \"72h\"\n  release_age_exempt_version \"registry.test/a/b\" {\n    versions = \"= 1.1.0\"\n    reason = \"r\"\n  }\n}")
	if v := p.Version(Provider, "registry.test/a/b", "1.1.0", young, now); !v.Allowed {
		t.Errorf("exempt 1.1.0: %+v", v)
	}
	if v := p.Version(Provider, "registry.test/a/b", "1.1.0+build", young, now); v.Allowed {
		t.Errorf("exempt 1.1.0 on 1.1.0+build, released now: %+v, want held", v)
	}
	// A module's constraint may spell its versions as its registry does
	// ("v1.1.0"); a provider's "v" is refused with its place, not read as
	// nothing: the operator learns the rule does not say what was meant.
	for _, c := range []string{"v1.1.0", "= v1.1.0", ">= v1.1.0, < v1.1.1"} {
		p := mustDecode(t, fmt.Sprintf("policy {\n  minimum_release_age = \"72h\"\n  deny_version \"registry.test/a/b/c\" {\n    versions = %q\n    reason = \"r\"\n  }\n  release_age_exempt_version \"registry.test/a/b/d\" {\n    versions = %q\n  }\n}", c, c))
		for _, v := range []string{"1.1.0", "v1.1.0", "1.1.0+build"} {
			if got := p.Version(Module, "registry.test/a/b/c", v, young, now); got.Rule != RuleDenyVersion {
				t.Errorf("module deny %q on %s: %+v, want refused", c, v, got)
			}
		}
		if got := p.Version(Module, "registry.test/a/b/d", "v1.1.0", young, now); !got.Allowed {
			t.Errorf("module exemption %q on v1.1.0: %+v, want allowed", c, got)
		}
	}
	if _, diags := decode(t, "mirror.hcl", "policy {\n  deny_version \"registry.test/a/b\" {\n    versions = \"v1.1.0\"\n    reason = \"r\"\n  }\n}"); !diags.HasErrors() || !strings.Contains(diags.Error(), "mirror.hcl:3") {
		t.Errorf("provider deny_version v1.1.0: %v, want an error at mirror.hcl:3", diags)
	}
}

// A module version is judged in every spelling a module registry gives
// it: "v1.1.0" is 1.1.0 (retention asks with the origin's spelling), so
// a deny of another version does not refuse it, a deny of 1.1.0 does,
// and an exemption of 1.1.0 lets it through. A provider's "v1.1.0" is
// not a version (the clients never send one).
func TestModuleVersionEverySpelling(t *testing.T) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	young := Release{At: now, Known: true}
	const addr = "registry.test/a/b/c"
	other := mustDecode(t, "policy {\n  deny_version \""+addr+"\" {\n    versions = \"= 2.0.0\"\n    reason = \"r\"\n  }\n}")
	this := mustDecode(t, "policy {\n  deny_version \""+addr+"\" {\n    versions = \"= 1.1.0\"\n    reason = \"r\"\n  }\n}")
	exempt := mustDecode(t, "policy {\n  minimum_release_age = \"72h\"\n  release_age_exempt_version \""+addr+"\" {\n    versions = \"= 1.1.0\"\n  }\n}")
	for _, v := range []string{"1.1.0", "v1.1.0"} {
		if got := other.Version(Module, addr, v, young, now); !got.Allowed {
			t.Errorf("module %s under a deny of 2.0.0: %+v, want allowed", v, got)
		}
		if got := this.Version(Module, addr, v, young, now); got.Rule != RuleDenyVersion {
			t.Errorf("module %s under a deny of 1.1.0: %+v, want refused", v, got)
		}
		if got := exempt.Version(Module, addr, v, young, now); !got.Allowed {
			t.Errorf("module %s under an exemption of 1.1.0: %+v, want allowed", v, got)
		}
	}
	p := mustDecode(t, "policy {\n  deny_version \"registry.test/a/b\" {\n    versions = \"= 2.0.0\"\n    reason = \"r\"\n  }\n}")
	if got := p.Version(Provider, "registry.test/a/b", "v1.1.0", young, now); got.Allowed {
		t.Errorf("provider v1.1.0 under a deny: %+v, want refused as not a version", got)
	}
}
