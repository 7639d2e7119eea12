package addrs

import "testing"

// Every spelling of one module is one address, in its normal form; the
// origin is asked for it as it was given.
func TestModuleNormalForm(t *testing.T) {
	for in, want := range map[string]struct{ normal, origin string }{
		"hashicorp/consul/aws":                                {"registry.terraform.io/hashicorp/consul/aws", "hashicorp/consul/aws"},
		"HashiCorp/Consul/AWS":                                {"registry.terraform.io/hashicorp/consul/aws", "HashiCorp/Consul/aws"},
		"Registry.Terraform.IO/Terraform-AWS-Modules/VPC/aws": {"registry.terraform.io/terraform-aws-modules/vpc/aws", "Terraform-AWS-Modules/VPC/aws"},
		"example.com:8443/Acme/net_work/AzureRM":              {"example.com:8443/acme/net_work/azurerm", "Acme/net_work/azurerm"},
	} {
		m, err := ParseModule(in)
		if err != nil {
			t.Fatalf("ParseModule(%q): %v", in, err)
		}
		p := m.OriginPath()
		if got := p[0] + "/" + p[1] + "/" + p[2]; m.String() != want.normal || got != want.origin {
			t.Errorf("ParseModule(%q) = %s, asked of the origin as %s; want %s, %s", in, m, got, want.normal, want.origin)
		}
		if m.Normal() != m.Normal().Normal() || m.Normal().String() != m.String() {
			t.Errorf("%q: the normal form is not stable", in)
		}
		lower, _ := ParseModule(want.normal)
		if m.Normal() != lower {
			t.Errorf("%q: normal form %+v, want it equal to %+v", in, m.Normal(), lower)
		}
	}
	// A hand-made address is keyed in the normal form too.
	m := Module{Hostname: DefaultModuleHost, Namespace: "Acme", Name: "VPC", System: "AWS"}
	if m.String() != "registry.terraform.io/acme/vpc/aws" || m.OriginPath() != [3]string{"Acme", "VPC", "aws"} {
		t.Errorf("literal: %s, %v", m, m.OriginPath())
	}
	for _, bad := range []string{"a/b", "-a/b/c", "a/b/c-d", "a/b_/c", "a/b/c/d/e"} {
		if m, err := ParseModule(bad); err == nil {
			t.Errorf("ParseModule(%q) = %v, want an error", bad, m)
		}
	}
}
