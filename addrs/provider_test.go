package addrs

import (
	"strings"
	"testing"
)

// The cases follow the clients: what Terraform's parser accepts in a
// source address, and how it normalises it.
func TestParseProvider(t *testing.T) {
	tests := []struct {
		name, in        string
		want            string // Provider.String(); "" when an error is expected
		wantErrContains string
	}{
		{name: "namespace and type", in: "hashicorp/random", want: "registry.terraform.io/hashicorp/random"},
		{name: "full address", in: "registry.terraform.io/hashicorp/random", want: "registry.terraform.io/hashicorp/random"},
		{name: "host normalised", in: "Registry.Terraform.IO/hashicorp/random", want: "registry.terraform.io/hashicorp/random"},
		{name: "default port dropped", in: "example.com:443/acme/foo", want: "example.com/acme/foo"},
		{name: "other port kept", in: "example.com:8443/acme/foo", want: "example.com:8443/acme/foo"},
		{name: "unicode host to punycode", in: "café.example/acme/foo", want: "xn--caf-dma.example/acme/foo"},
		{name: "punycode host read back", in: "xn--caf-dma.example/acme/foo", want: "xn--caf-dma.example/acme/foo"},
		{name: "punycode host with port read back", in: "XN--CAF-DMA.example:8443/acme/foo", want: "xn--caf-dma.example:8443/acme/foo"},
		{name: "namespace and type case-folded", in: "example.com/HashiCorp/Random", want: "example.com/hashicorp/random"},
		{name: "unicode namespace case-folded", in: "example.com/CAFÉ/foo", want: "example.com/café/foo"},
		{name: "fullwidth letters mapped", in: "example.com/ａｃｍｅ/foo", want: "example.com/acme/foo"},
		{name: "dash inside", in: "example.com/my-org/my-type", want: "example.com/my-org/my-type"},
		{name: "leading digit", in: "example.com/1org/2type", want: "example.com/1org/2type"},
		{name: "longest part", in: "example.com/" + strings.Repeat("a", 64) + "/foo", want: "example.com/" + strings.Repeat("a", 64) + "/foo"},

		{name: "bare type", in: "random", wantErrContains: "want [HOST/]NAMESPACE/TYPE"},
		{name: "four parts", in: "example.com/a/b/c", wantErrContains: "want [HOST/]NAMESPACE/TYPE"},
		{name: "empty", in: "", wantErrContains: "want [HOST/]NAMESPACE/TYPE"},
		{name: "empty namespace", in: "example.com//foo", wantErrContains: "namespace is empty"},
		{name: "empty type", in: "hashicorp/", wantErrContains: "type is empty"},
		{name: "empty host", in: "/hashicorp/random", wantErrContains: "invalid host"},
		{name: "bad punycode host", in: "xn--zz.example/acme/foo", wantErrContains: "invalid host"},
		{name: "url for host", in: "https://example.com/acme/foo", wantErrContains: "want [HOST/]NAMESPACE/TYPE"},
		{name: "legacy namespace", in: "-/random", wantErrContains: "invalid namespace"},
		{name: "underscore", in: "example.com/a_b/foo", wantErrContains: "invalid namespace"},
		{name: "dot", in: "example.com/a.b/foo", wantErrContains: "dots"},
		{name: "leading dash", in: "example.com/-a/foo", wantErrContains: "invalid namespace"},
		{name: "trailing dash", in: "example.com/a/foo-", wantErrContains: "invalid type"},
		{name: "double dash", in: "example.com/a--b/foo", wantErrContains: "consecutive dashes"},
		{name: "space", in: "example.com/a b/foo", wantErrContains: "invalid namespace"},
		{name: "terraform- type", in: "hashicorp/terraform-provider-random", wantErrContains: `"terraform-"`},
		{name: "terraform- type, other word", in: "hashicorp/terraform-random", wantErrContains: `"terraform-"`},
		{name: "overlong part", in: "example.com/" + strings.Repeat("a", 65) + "/foo", wantErrContains: "too long"},
		{name: "overlong address", in: strings.Repeat("a", 1000), wantErrContains: "too long"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParseProvider(tc.in)
			if tc.want != "" {
				if err != nil {
					t.Fatalf("ParseProvider(%q): %v", tc.in, err)
				}
				if p.String() != tc.want {
					t.Fatalf("ParseProvider(%q) = %q, want %q", tc.in, p, tc.want)
				}
				// The normal form parses to itself.
				if again, err := ParseProvider(p.Hostname.ForDisplay() + "/" + p.Namespace + "/" + p.Type); err != nil || again != p {
					t.Fatalf("normal form %s parses to %s, %v", p, again, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseProvider(%q) = %s, want an error", tc.in, p)
			}
			if !strings.Contains(err.Error(), tc.wantErrContains) {
				t.Fatalf("ParseProvider(%q) error %q does not contain %q", tc.in, err, tc.wantErrContains)
			}
		})
	}
}

func TestProviderAndPlatformString(t *testing.T) {
	p := Provider{Hostname: "registry.example.com", Namespace: "hashicorp", Type: "random"}
	if got := p.String(); got != "registry.example.com/hashicorp/random" {
		t.Errorf("Provider.String() = %q", got)
	}
	if got := (Platform{OS: "linux", Arch: "amd64"}).String(); got != "linux_amd64" {
		t.Errorf("Platform.String() = %q", got)
	}
}

// What String writes of an address parses back to the same address,
// an IDN host (punycode) and a port included.
func TestAddressesReadBack(t *testing.T) {
	for _, s := range []string{"bücher.example", "bücher.example:8443", "straße.example", "a.bücher.example:5000", "example.com:8443"} {
		p, err := ParseProvider(s + "/acme/foo")
		if err != nil {
			t.Fatal(err)
		}
		if again, err := ParseProvider(p.String()); err != nil || again != p {
			t.Errorf("ParseProvider(%q) = %v, %v; want %v", p.String(), again, err, p)
		}
		m, err := ParseModule(s + "/acme/net/aws")
		if err != nil {
			t.Fatal(err)
		}
		if again, err := ParseModule(m.String()); err != nil || again != m {
			t.Errorf("ParseModule(%q) = %v, %v; want %v", m.String(), again, err, m)
		}
		if h, err := ParseHost(string(p.Hostname)); err != nil || h != p.Hostname {
			t.Errorf("ParseHost(%q) = %q, %v", p.Hostname, h, err)
		}
	}
}
