package policy

import (
	"fmt"
	"testing"
	"time"
)

// An address whose host addrs does not read (a host ending in a dot or
// with an empty label, a label in punycode that is not the normal form
// of any host) is refused as not valid, as Address says: never taken, as
// it was, for another address that no rule names. "registry.terraform.io./hashicorp/null" is
// the host a deny names spelt with a trailing dot, and passed a deny of
// registry.terraform.io/hashicorp/null; "xn--bucher-xyd.example" is
// bücher.example with its ü decomposed, in punycode, which svchost reads
// as no host, and passed a deny of bücher.example/a/b.
func TestAddressSpellingsTheParserRefusesAreRefused(t *testing.T) {
	p := mustDecode(t, `policy {
  deny = ["registry.terraform.io/hashicorp/null", "bücher.example/a/b", "registry.test/ns/mod/aws"]
  deny_version "registry.terraform.io/hashicorp/aws" {
    versions = "= 5.80.0"
    reason   = "r"
  }
}`)
	for _, c := range []struct {
		kind Kind
		addr string
	}{
		{Provider, "registry.terraform.io./hashicorp/null"},
		{Provider, ".registry.terraform.io/hashicorp/null"},
		{Provider, "registry..terraform.io/hashicorp/null"},
		{Provider, "xn--bucher-xyd.example/a/b"},
		{Module, "registry.test./ns/mod/aws"},
		{Module, "xn--bucher-xyd.example/ns/mod/aws"},
	} {
		t.Run(fmt.Sprintf("%s %s", c.kind, c.addr), func(t *testing.T) {
			if v := p.Address(c.kind, c.addr); v.Allowed {
				t.Errorf("Address: %+v, want refused", v)
			}
			sub := p.For(c.kind, c.addr)
			if v := sub.Address(); v.Allowed {
				t.Errorf("For: %+v, want refused", v)
			}
		})
	}
	if v := p.Version(Provider, "registry.terraform.io./hashicorp/aws", "5.80.0", Release{Known: true}, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)); v.Allowed {
		t.Errorf("deny_version on a trailing-dot spelling: %+v, want refused", v)
	}
	// The normal forms stay as they were: judged by the rules.
	for _, c := range []struct {
		kind    Kind
		addr    string
		allowed bool
	}{
		{Provider, "registry.terraform.io/hashicorp/null", false},
		{Provider, "xn--bcher-kva.example/a/b", false},
		{Provider, "xn--bcher-kva.example/a/c", true},
		{Provider, "registry.terraform.io/hashi-corp/null", true},
		{Module, "registry.test/ns/mod/aws", false},
		{Module, "registry.test/n_s/mod/aws", true},
		// A CLI product's address (releases.Address) is judged by the
		// rules, though no provider type starts with "terraform-".
		{Provider, "releases.hashicorp.com/hashicorp/terraform-ls", true},
	} {
		if v := p.Address(c.kind, c.addr); v.Allowed != c.allowed {
			t.Errorf("%s %s: %+v, want allowed %v", c.kind, c.addr, v, c.allowed)
		}
	}
}
