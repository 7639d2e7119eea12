package manifest

import (
	"context"
	"fmt"
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
	got := taken(spec, list)
	if want := "aws ~> 5.0, >= 4.1, < 5.5: 5.4.0; random ~> 3.0: 3.9.0"; strings.Join(got, "; ") != want {
		t.Errorf("selections %q, want %q", got, want)
	}
}

// A module block in an override file is merged into the module block of
// its name: a version there pins the call's (here ~> 2.0 over ~> 1.0), a
// source moves it (./b over ./a: terraform providers lists acme/y, not
// acme/x). Sync refused the directory, the override's block having no
// source of its own.
func TestOverrideFilesMergeModuleBlocks(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"main.tf":     "module \"net\" {\n  source  = \"acme/net/aws\"\n  version = \"~> 1.0\"\n}\nmodule \"local\" {\n  source = \"./a\"\n}\n",
		"override.tf": "module \"net\" {\n  version = \"~> 2.0\"\n}\nmodule \"local\" {\n  source = \"./b\"\n}\n",
		"a/main.tf":   "terraform {\n  required_providers {\n    x = { source = \"acme/x\" }\n  }\n}\n",
		"b/main.tf":   "terraform {\n  required_providers {\n    y = { source = \"acme/y\" }\n  }\n}\n",
	})
	spec, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Providers) != 1 || spec.Providers[0].Address.Type != "y" {
		t.Errorf("providers %v, want acme/y alone", spec.Providers)
	}
	if len(spec.Modules) != 1 || len(spec.Modules[0].Selections) != 1 || spec.Modules[0].Selections[0].Text != "~> 2.0" {
		t.Fatalf("modules %+v, want acme/net/aws, ~> 2.0 alone", spec.Modules)
	}
	if w := spec.Modules[0].Selections[0].Where; !strings.Contains(w, "main.tf:2") {
		t.Errorf("the call is asked at %s, want its block's source in main.tf:2", w)
	}
}

// A stranger's package overrides at most as many module blocks as it may
// make calls: each overridden block's arguments are held while its files
// are read, and override files of millions were held whole.
func TestOverrideModuleBlocksBounded(t *testing.T) {
	var blocks strings.Builder
	for i := range 4 {
		fmt.Fprintf(&blocks, "module \"m%d\" {\n  version = \"~> 2.0\"\n}\n", i)
	}
	dir := writeFiles(t, map[string]string{
		"main.tf":     "module \"m0\" {\n  source = \"acme/m0/aws\"\n}\n",
		"override.tf": blocks.String(),
	})
	_, err := (&Spec{}).readModuleDir(context.Background(), dir, dir, "module acme/p/aws 1.0.0", 2, 1)
	if err == nil || !strings.Contains(err.Error(), "override.tf:10") || !strings.Contains(err.Error(), "more than 3 module blocks overridden") {
		t.Errorf("a package overriding 4 module blocks, taking 3 calls: %v, want refused at the fourth", err)
	}
	if _, err := (&Spec{}).readModuleDir(context.Background(), dir, dir, "module acme/p/aws 1.0.0", 3, 1); err != nil {
		t.Errorf("a package overriding 4 module blocks, taking 4 calls: %v", err)
	}
}
