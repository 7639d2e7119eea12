package manifest

import (
	"strings"
	"testing"

	"github.com/apparentlymart/go-versions/versions"
)

// An override file (override.tf, NAME_override.tf, and their .tf.json)
// is merged into its module after the other files, as Terraform and
// OpenTofu merge it: a required_providers entry there replaces the
// module's for its local name, and a provider block's version the
// version of the block of its name and alias; what it leaves unnamed
// stays. For these files terraform providers lists aws ">= 4.1.0,
// ~> 5.0, < 5.5.0" and random "~> 3.0". Sync intersected the override
// with what it overrides, ~> 4.0 with ~> 5.0, and synced nothing for
// aws, saying no version matched.
func TestOverrideFilesReplaceWhatTheyOverride(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"main.tf": `terraform {
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 4.0"
    }
    random = {
      source  = "hashicorp/random"
      version = "~> 3.0"
    }
  }
}
provider "aws" {
  version = ">= 4.1"
}
provider "aws" {
  alias   = "w"
  version = "< 4.9"
}
`,
		"override.tf": `terraform {
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.0"
    }
  }
}
`,
		"x_override.tf.json": `{"provider": {"aws": {"alias": "w", "version": "< 5.5"}}}`,
	})
	spec, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	list := versions.List{
		versions.MustParseVersion("3.9.0"),
		versions.MustParseVersion("4.8.0"),
		versions.MustParseVersion("5.4.0"),
		versions.MustParseVersion("5.6.0"),
	}
	var got []string
	for _, p := range spec.Providers {
		for _, sel := range p.Selections {
			took := "none"
			if vs := sel.Select(list); len(vs) > 0 {
				took = vs[0].String()
			}
			got = append(got, p.Address.Type+" "+sel.Text+": "+took)
		}
	}
	if want := "aws ~> 5.0, >= 4.1, < 5.5: 5.4.0; random ~> 3.0: 3.9.0"; strings.Join(got, "; ") != want {
		t.Errorf("selections %q, want %q", got, want)
	}
}
