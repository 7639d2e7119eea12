package policy

import (
	"strings"
	"testing"
	"time"
)

func TestParseAddress(t *testing.T) {
	for _, c := range []struct {
		in   string
		kind Kind
		addr string
		bad  bool
	}{
		{in: "hashicorp/aws", kind: Provider, addr: "registry.terraform.io/hashicorp/aws"},
		{in: "registry.terraform.io/HashiCorp/AWS", kind: Provider, addr: "registry.terraform.io/hashicorp/aws"},
		{in: "mirror.test:8443/acme/x", kind: Provider, addr: "mirror.test:8443/acme/x"},
		{in: "localhost/acme/x", kind: Provider, addr: "localhost/acme/x"},
		{in: "terraform-aws-modules/vpc/aws", kind: Module, addr: "registry.terraform.io/terraform-aws-modules/vpc/aws"},
		{in: "registry.test/acme/vpc/aws", kind: Module, addr: "registry.test/acme/vpc/aws"},
		{in: "aws", bad: true},
		{in: "a/b/c/d/e", bad: true},
		{in: "registry.test/acme/terraform-provider-x", bad: true},
		{in: "", bad: true},
	} {
		kind, addr, err := ParseAddress(c.in)
		if c.bad {
			if err == nil {
				t.Errorf("%q: accepted as %s %s", c.in, kind, addr)
			}
			continue
		}
		if err != nil || kind != c.kind || addr != c.addr {
			t.Errorf("%q: %s %s %v, want %s %s", c.in, kind, addr, err, c.kind, c.addr)
		}
	}
}

// An explanation names the verdict, the deciding rule with its place,
// the reason and what is known of the release, for an allowed, a denied
// and a held version.
func TestExplain(t *testing.T) {
	p := mustDecode(t, example)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	aws := "registry.terraform.io/hashicorp/aws"
	for _, c := range []struct {
		name    string
		version string
		rel     Release
		want    []string
	}{
		{"allowed", "5.79.0", Release{At: now.Add(-30 * 24 * time.Hour), Known: true}, []string{
			"provider registry.terraform.io/hashicorp/aws 5.79.0: allowed\n",
			"  decided by: minimum_release_age = \"72h\" (mirror.hcl:15)\n",
			"  released:   2026-01-30T12:00:00Z (the cache)\n",
		}},
		{"denied", "5.80.0", Release{}, []string{
			"provider registry.terraform.io/hashicorp/aws 5.80.0: refused (deny_version)\n",
			"  decided by: deny_version \"registry.terraform.io/hashicorp/aws\" { versions = \">= 5.80.0, < 5.81.1\" } (mirror.hcl:10)\n",
			"  reason:     CVE-2026-1234: use 5.81.1\n",
		}},
		{"held", "5.82.0", Release{At: now.Add(-time.Hour), Known: true}, []string{
			"provider registry.terraform.io/hashicorp/aws 5.82.0: held back (min_release_age) until 2026-03-04T11:00:00Z\n",
			"  decided by: minimum_release_age = \"72h\" (mirror.hcl:15)\n",
			"  minimum release age: 72h\n",
			"  released:   2026-03-01T11:00:00Z (the cache)\n",
		}},
		{"held, not known", "5.83.0", Release{}, []string{
			"5.83.0: held back (min_release_age) until its release time is known\n",
			"  released:   not known (the cache)\n",
		}},
		// A version of the first listing (the bootstrap) is taken as
		// released before the mirror looked: it printed year 1.
		{"first listing", "5.78.0", Release{Known: true}, []string{
			"5.78.0: allowed\n",
			"  released:   before the mirror first listed it (the cache)\n",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := p.Explain(Provider, aws, c.version, c.rel, "the cache", now).String()
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("explanation\n%s\nlacks %q", got, w)
				}
			}
		})
	}
	got := p.Explain(Provider, "registry.terraform.io/hashicorp/null", "", Release{}, "", now).String()
	if !strings.HasPrefix(got, "provider registry.terraform.io/hashicorp/null: refused (deny)\n  decided by: deny \"registry.terraform.io/hashicorp/null\" (mirror.hcl:8)\n") {
		t.Errorf("address explanation:\n%s", got)
	}
	var none *Policy
	if got := none.Explain(Module, "registry.test/a/b/c", "1.0.0", Release{}, "", now).String(); got != "module registry.test/a/b/c 1.0.0: allowed\n  decided by: none applies: allowed by default\n" {
		t.Errorf("no policy:\n%s", got)
	}
}

// ParseAddressAs reads an address as the kind given, whatever its first
// part looks like; no kind reads it as ParseAddress does.
func TestParseAddressAs(t *testing.T) {
	for _, c := range []struct {
		in, as string
		kind   Kind
		addr   string
		bad    bool
	}{
		{in: "vm/hashicorp/null", as: "provider", kind: Provider, addr: "vm/hashicorp/null"},
		{in: "vm/hashicorp/null", as: "module", kind: Module, addr: "registry.terraform.io/vm/hashicorp/null"},
		{in: "vm/hashicorp/null", as: "", kind: Module, addr: "registry.terraform.io/vm/hashicorp/null"},
		{in: "registry.test/acme/vpc", as: "module", bad: true},
		{in: "hashicorp/aws", as: "module", bad: true},
		{in: "registry.test/acme/vpc/aws", as: "provider", bad: true},
		{in: "hashicorp/aws", as: "modul", bad: true},
	} {
		kind, addr, err := ParseAddressAs(Kind(c.as), c.in)
		if c.bad {
			if err == nil {
				t.Errorf("%q as %q: accepted as %s %s", c.in, c.as, kind, addr)
			}
			continue
		}
		if err != nil || kind != c.kind || addr != c.addr {
			t.Errorf("%q as %q: %s %s %v, want %s %s", c.in, c.as, kind, addr, err, c.kind, c.addr)
		}
	}
	for in, want := range map[string]bool{"vm/hashicorp/null": true, "terraform-aws-modules/vpc/aws": true, "registry.test/acme/x": false, "localhost/acme/x": false, "h:8443/acme/x": false, "hashicorp/aws": false, "a/b/c/d": false} {
		if got := ReadAsModule(in); got != want {
			t.Errorf("ReadAsModule(%q) = %v, want %v", in, got, want)
		}
	}
}
