package oci

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

// specName is the distribution-spec's repository name grammar, written
// out here independently of the package's own.
var specName = regexp.MustCompile(`^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(\/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*$`)

func testNames(t *testing.T) Names {
	t.Helper()
	n, err := NewNames("tfmirror/providers", "tfmirror/modules")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestProviderNames(t *testing.T) {
	n := testNames(t)
	tests := []struct {
		name, addr, want string
	}{
		{"plain", "registry.opentofu.org/hashicorp/aws", "tfmirror/providers/registry.opentofu.org/hashicorp/aws"},
		{"upper case normalised first", "Registry.OpenTofu.org/HashiCorp/AWS", "tfmirror/providers/registry.opentofu.org/hashicorp/aws"},
		{"host with a port", "mirror.example.com:8443/acme/net", "tfmirror/providers/mirror.example.com__8443/acme/net"},
		{"international host", "bücher.example/acme/net", "tfmirror/providers/xn--bcher-kva.example/acme/net"},
		{"dashes", "example.com/a-b/c--d", ""},
		{"non-ASCII namespace", "example.com/café/net", "tfmirror/providers/example.com/caf.x636166c3a9/net"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := addrs.ParseProvider(tt.addr)
			if err != nil {
				if tt.want == "" {
					return // the address itself is refused: nothing to map
				}
				t.Fatal(err)
			}
			got := n.Provider(p)
			if tt.want != "" && got != tt.want {
				t.Errorf("Provider(%s) = %q, want %q", p, got, tt.want)
			}
			if !specName.MatchString(got) {
				t.Errorf("%q is not a valid OCI repository name", got)
			}
			r, err := n.Parse(got)
			if err != nil {
				t.Fatal(err)
			}
			if r.Kind != KindProvider || r.Provider != p {
				t.Errorf("Parse(%q) = %+v, want %v", got, r, p)
			}
		})
	}
}

func TestModuleNames(t *testing.T) {
	n := testNames(t)
	tests := []struct {
		name, addr, want string
	}{
		{"plain", "registry.terraform.io/acme/net/aws", "tfmirror/modules/registry.terraform.io/acme/net/aws"},
		{"single underscore kept", "example.com/acme_corp/my_net/aws", "tfmirror/modules/example.com/acme_corp/my_net/aws"},
		{"upper case", "example.com/Acme_Corp/net/aws", "tfmirror/modules/example.com/acme-corp.x41636d655f436f7270/net/aws"},
		{"upper case system read in lowercase", "example.com/acme/net/AWS", "tfmirror/modules/example.com/acme/net/aws"},
		{"underscore then dash", "example.com/a_-b/net/aws", "tfmirror/modules/example.com/a-b.x615f2d62/net/aws"},
		{"three underscores", "example.com/a___b/net/aws", "tfmirror/modules/example.com/a-b.x615f5f5f62/net/aws"},
		{"host with a port", "localhost:5000/acme/net/aws", "tfmirror/modules/localhost__5000/acme/net/aws"},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := addrs.ParseModule(tt.addr)
			if err != nil {
				t.Fatal(err)
			}
			got := n.Module(m)
			if got != tt.want {
				t.Errorf("Module(%s) = %q, want %q", m, got, tt.want)
			}
			if !specName.MatchString(got) {
				t.Errorf("%q is not a valid OCI repository name", got)
			}
			if other, ok := seen[got]; ok && other != m.String() {
				t.Errorf("%s and %s share the name %q", m, other, got)
			}
			seen[got] = m.String()
			r, err := n.Parse(got)
			if err != nil {
				t.Fatal(err)
			}
			if r.Kind != KindModule || r.Module != m {
				t.Errorf("Parse(%q) = %+v, want %v", got, r, m)
			}
		})
	}
}

// Names that no address maps to, or not in the one form an address has:
// each is refused with ErrNotMirrored, so that the front door answers
// NAME_UNKNOWN.
func TestParseRefusesHostileNames(t *testing.T) {
	n := testNames(t)
	tests := []struct{ name, repo string }{
		{"empty", ""},
		{"prefix only", "tfmirror/providers"},
		{"other prefix", "library/alpine"},
		{"prefix of a prefix", "tfmirror/registry.opentofu.org/hashicorp/aws"},
		{"too few parts", "tfmirror/providers/registry.opentofu.org/hashicorp"},
		{"too many parts", "tfmirror/providers/registry.opentofu.org/hashicorp/aws/x"},
		{"module with too few parts", "tfmirror/modules/example.com/acme/net"},
		{"upper case", "tfmirror/providers/registry.opentofu.org/HashiCorp/aws"},
		{"dot dot", "tfmirror/providers/registry.opentofu.org/../aws"},
		{"empty component", "tfmirror/providers//hashicorp/aws"},
		{"trailing slash", "tfmirror/providers/registry.opentofu.org/hashicorp/aws/"},
		{"port with a colon", "tfmirror/providers/example.com:8443/hashicorp/aws"},
		{"port not a number", "tfmirror/providers/example.com__abc/hashicorp/aws"},
		{"port out of range", "tfmirror/providers/example.com__99999/hashicorp/aws"},
		{"default port written", "tfmirror/providers/example.com__443/hashicorp/aws"},
		{"two ports", "tfmirror/providers/example.com__1__2/hashicorp/aws"},
		{"underscore in host", "tfmirror/providers/ex_ample.com/hashicorp/aws"},
		{"bad punycode", "tfmirror/providers/xn--zz.example/hashicorp/aws"},
		{"type with terraform- prefix", "tfmirror/providers/example.com/hashicorp/terraform-aws"},
		{"escaped form of a plain name", "tfmirror/providers/example.com/acme.x61636d65/aws"},
		{"escape not hex", "tfmirror/providers/example.com/acme.xzz/aws"},
		{"escape empty", "tfmirror/modules/example.com/acme.x/net/aws"},
		{"escape with a wrong readable form", "tfmirror/modules/example.com/other.x41636d65/net/aws"},
		{"escape of a slash", "tfmirror/modules/example.com/a-b.x612f62/net/aws"},
		{"module name starting with underscore", "tfmirror/modules/example.com/acme/x.x5f6e6574/aws"},
		{"too long", "tfmirror/providers/" + strings.Repeat("a", 2000) + "/hashicorp/aws"},
		{"type too long", "tfmirror/providers/example.com/hashicorp/" + strings.Repeat("a", 65)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := n.Parse(tt.repo)
			if err == nil {
				t.Fatalf("Parse(%q) = %+v", tt.repo, r)
			}
			if !errors.Is(err, ErrNotMirrored) {
				t.Errorf("error %v does not wrap ErrNotMirrored", err)
			}
		})
	}
}

func TestNewNamesRefuses(t *testing.T) {
	tests := []struct{ name, providers, modules string }{
		{"empty provider prefix", "", "modules"},
		{"empty module prefix", "providers", ""},
		{"same prefix", "oci", "oci"},
		{"module prefix under provider prefix", "oci", "oci/modules"},
		{"provider prefix under module prefix", "oci/modules/p", "oci/modules"},
		{"upper case", "Providers", "modules"},
		{"leading slash", "/providers", "modules"},
		{"trailing slash", "providers/", "modules"},
		{"colon", "providers:1", "modules"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewNames(tt.providers, tt.modules); err == nil {
				t.Errorf("NewNames(%q, %q) accepted", tt.providers, tt.modules)
			}
		})
	}
	if _, err := NewNames("oci/providers", "oci/providers-modules"); err != nil {
		t.Errorf("prefixes sharing a leading string but not a path: %v", err)
	}
}

func TestTags(t *testing.T) {
	tests := []struct{ version, tag string }{
		{"1.0.0", "1.0.0"},
		{"1.2.3-beta.1", "1.2.3-beta.1"},
		{"1.2.3+build.7", "1.2.3_build.7"},
		{"1.2.3-rc1+meta-data", "1.2.3-rc1_meta-data"},
	}
	for _, tt := range tests {
		tag, ok := Tag(tt.version)
		if !ok || tag != tt.tag {
			t.Errorf("Tag(%q) = %q, %v; want %q", tt.version, tag, ok, tt.tag)
		}
		v, ok := ParseTag(tt.tag)
		if !ok || v != tt.version {
			t.Errorf("ParseTag(%q) = %q, %v; want %q", tt.tag, v, ok, tt.version)
		}
	}
	for _, tag := range []string{"latest", "v1.0.0", "1.0.0__x", "1.0.0_", "_1.0.0", "1.0.0_a_b", "", "1.0.0-" + strings.Repeat("a", 200), "99999999999999999999.0.0", "1.0.0+x", "1.0.0-a..b", "1.0", "01.0.0"} {
		if v, ok := ParseTag(tag); ok {
			t.Errorf("ParseTag(%q) = %q, want no version", tag, v)
		}
	}
	for _, v := range []string{"latest", "", "1.0.0-" + strings.Repeat("a", 200)} {
		if tag, ok := Tag(v); ok {
			t.Errorf("Tag(%q) = %q, want none", v, tag)
		}
	}
}

// FuzzParse holds the mapping to one name per address: whatever Parse
// accepts is what the address maps back to.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"p/registry.opentofu.org/hashicorp/aws", "m/example.com/acme-corp.x41636d655f436f7270/net/aws",
		"p/example.com__8443/a/b", "m/localhost__5000/acme/net/aws", "p/xn--bcher-kva.example/a/b",
	} {
		f.Add(s)
	}
	n, err := NewNames("p", "m")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := n.Parse(s)
		if err != nil {
			return
		}
		back := ""
		switch r.Kind {
		case KindProvider:
			back = n.Provider(r.Provider)
			if _, err := svchost.ForComparison(r.Provider.Hostname.ForDisplay()); err != nil {
				t.Errorf("%q: host %q does not parse: %v", s, r.Provider.Hostname, err)
			}
		case KindModule:
			back = n.Module(r.Module)
		}
		if back != s || !specName.MatchString(s) {
			t.Errorf("Parse(%q) = %+v, which maps to %q", s, r, back)
		}
	})
}

// A module repository's tag is the version's, with or without the
// leading "v" the module registry protocol allows: both name the one
// version; what is not a version's tag names none.
func TestModuleTags(t *testing.T) {
	for tag, want := range map[string]string{
		"1.0.0":              "1.0.0",
		"v1.0.0":             "1.0.0",
		"1.2.3_build.7":      "1.2.3+build.7",
		"v1.2.3-rc1_meta-da": "1.2.3-rc1+meta-da",
	} {
		v, ok := ParseModuleTag(tag)
		if !ok || v.String() != want {
			t.Errorf("ParseModuleTag(%q) = %s, %v; want %s", tag, v, ok, want)
		}
	}
	for _, tag := range []string{"latest", "v", "vv1.0.0", "V1.0.0", "1.0", "v1.0", "01.0.0", "v01.0.0", "1.0.0_", "1.0.0-", "1.0.0+x",
		"v1.0.0__x", "", "99999999999999999999.0.0", "v1.0.0-" + strings.Repeat("a", 200)} {
		if v, ok := ParseModuleTag(tag); ok {
			t.Errorf("ParseModuleTag(%q) = %s, want no version", tag, v)
		}
	}
}
