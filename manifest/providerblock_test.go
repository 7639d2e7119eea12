package manifest

import (
	"strings"
	"testing"

	"github.com/apparentlymart/go-versions/versions"
)

// A provider block's version argument, deprecated since Terraform 0.13,
// is still a constraint terraform init installs by, with those of
// required_providers ("Finding hashicorp/kubernetes versions matching
// "~> 1.10.0""), in the native syntax and in JSON, an aliased block's
// too. Sync took the newest version, which the configuration's
// terraform init through a sealed mirror then could not find.
func TestProviderBlockVersionConstrains(t *testing.T) {
	list := versions.List{
		versions.MustParseVersion("1.10.0"),
		versions.MustParseVersion("1.13.0"),
		versions.MustParseVersion("2.0.0"),
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"alone", map[string]string{"main.tf": "provider \"kubernetes\" {\n  version = \"~> 1.10.0\"\n  host    = var.host\n}\n"},
			"kubernetes ~> 1.10.0: 1.10.0"},
		{"with required_providers", map[string]string{"main.tf": "terraform {\n  required_providers {\n    kubernetes = {\n      source  = \"hashicorp/kubernetes\"\n      version = \">= 1.0\"\n    }\n  }\n}\nprovider \"kubernetes\" {\n  alias   = \"b\"\n  version = \"< 1.13.0\"\n}\n"},
			"kubernetes >= 1.0, < 1.13.0: 1.10.0"},
		{"json", map[string]string{"main.tf.json": `{"provider": {"kubernetes": {"version": "~> 1.10"}}}`},
			"kubernetes ~> 1.10: 1.13.0"},
		{"none", map[string]string{"main.tf": "provider \"kubernetes\" {\n  host = var.host\n}\n"},
			"kubernetes any version: 2.0.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := Load(writeFiles(t, tc.files))
			if err != nil {
				t.Fatal(err)
			}
			if got := taken(spec, list); strings.Join(got, "; ") != tc.want {
				t.Errorf("selections %q, want %q", got, tc.want)
			}
		})
	}
	// A version that is no string constraint is refused at its line.
	_, err := Load(writeFiles(t, map[string]string{"main.tf": "provider \"kubernetes\" {\n  version = 3\n}\n"}))
	if err == nil || !strings.Contains(err.Error(), "main.tf:2") || !strings.Contains(err.Error(), "must be a string") {
		t.Errorf("a version of 3: %v, want refused naming main.tf:2", err)
	}
}
