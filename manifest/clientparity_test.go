package manifest

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// providersAsked lists the addresses of a spec's providers, sorted.
func providersAsked(spec *Spec) []string {
	var out []string
	for _, p := range spec.Providers {
		out = append(out, p.Address.String())
	}
	slices.Sort(out)
	return out
}

// Configurations both clients read one way and sync read another, each
// checked against `terraform providers` and `tofu providers`: an
// override file's required_providers entry replaces the entry whole (its
// source too: none given is hashicorp/NAME); the built-in provider,
// declared to call its functions, is nothing to install; a provider
// reference in quotes, as 0.11 wrote it, is still one; and an override
// file's resource or data block that names a provider replaces the one
// its base block implies. Sync had asked for the base's source, failed
// on terraform.io/builtin/terraform, refused the quotes, and asked for
// the implied provider besides.
func TestProvidersAsTheClientsReadThem(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"an override entry without a source", map[string]string{
			"main.tf":          "terraform {\n  required_providers {\n    q = { source = \"acme/q\", version = \"~> 1.0\" }\n    r = { source = \"acme/r\", version = \"~> 1.0\" }\n  }\n}\n",
			"a_override.tf":    "terraform {\n  required_providers {\n    q = \"~> 2.0\"\n  }\n}\n",
			"override.tf.json": `{"terraform": {"required_providers": {"r": {"version": ">= 1.5"}}}}`,
		}, []string{"registry.terraform.io/hashicorp/q", "registry.terraform.io/hashicorp/r"}},
		{"the built-in provider declared", map[string]string{
			"main.tf": "terraform {\n  required_providers {\n    terraform = { source = \"terraform.io/builtin/terraform\" }\n  }\n}\noutput \"x\" {\n  value = provider::terraform::encode_tfvars({ a = 1 })\n}\nresource \"null_resource\" \"n\" {}\n",
		}, []string{"registry.terraform.io/hashicorp/null"}},
		{"a quoted provider reference", map[string]string{
			"main.tf": "provider \"aws\" {\n  alias = \"west\"\n}\nresource \"foo_thing\" \"a\" {\n  provider = \"aws.west\"\n}\n",
		}, []string{"registry.terraform.io/hashicorp/aws"}},
		{"an override naming the provider", map[string]string{
			"main.tf":     "terraform {\n  required_providers {\n    realfoo = { source = \"acme/foo\" }\n  }\n}\nresource \"foo_bar\" \"x\" {}\ndata \"zed_thing\" \"y\" {}\nresource \"baz_one\" \"z\" {}\n",
			"override.tf": "resource \"foo_bar\" \"x\" {\n  provider = realfoo\n}\ndata \"zed_thing\" \"y\" {\n  provider = realfoo\n}\nresource \"baz_one\" \"z\" {\n  count = 2\n}\n",
		}, []string{"registry.terraform.io/acme/foo", "registry.terraform.io/hashicorp/baz"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := LoadFor(Terraform, nil, writeFiles(t, tc.files))
			if err != nil {
				t.Fatal(err)
			}
			if got := providersAsked(spec); !slices.Equal(got, tc.want) {
				t.Errorf("providers %s, want %s", strings.Join(got, " "), strings.Join(tc.want, " "))
			}
		})
	}
}

// A module version written as a number is taken as its text, as both
// clients take it (version = 1 installs 1.0.0); sync refused it as not a
// string.
func TestModuleVersionAsANumber(t *testing.T) {
	for _, client := range []Client{Terraform, OpenTofu} {
		spec, err := LoadFor(client, nil, writeFiles(t, map[string]string{"main.tf": "module \"m\" {\n  source  = \"acme/m/aws\"\n  version = 1\n}\n"}))
		if err != nil {
			t.Fatalf("%s: %v", client, err)
		}
		if got := modulesAsked(spec); len(got) != 1 || !strings.HasSuffix(got[0], "/acme/m/aws 1") {
			t.Errorf("%s: modules %v, want acme/m/aws 1", client, got)
		}
	}
}

// OpenTofu asks for the provider every import block names or implies,
// whatever the resource it imports into declares and in whichever module
// it lies; Terraform takes the declared resource's (`tofu providers` and
// `terraform providers` on the same files). Sync read every directory as
// Terraform does, and a sealed tofu init failed on the provider missing.
func TestImportBlocksOfEachClient(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"main.tf": `terraform {
  required_providers {
    google-beta = { source = "hashicorp/google-beta", version = "~> 6.0" }
  }
}
resource "google_compute_network" "n" {
  provider = google-beta
}
import {
  to = google_compute_network.n
  id = "n"
}
import {
  to = module.c["a"].baz_thing.z
  id = "x"
}
module "c" {
  source = "./c"
}
`,
		"c/main.tf": "terraform {\n  required_providers {\n    p = { source = \"acme/p\" }\n  }\n}\nresource \"baz_thing\" \"z\" {\n  provider = p\n}\n",
	})
	for _, tc := range []struct {
		client Client
		want   []string
	}{
		{Terraform, []string{"registry.terraform.io/acme/p", "registry.terraform.io/hashicorp/google-beta"}},
		{OpenTofu, []string{"registry.opentofu.org/acme/p", "registry.opentofu.org/hashicorp/baz", "registry.opentofu.org/hashicorp/google", "registry.opentofu.org/hashicorp/google-beta"}},
	} {
		spec, err := LoadFor(tc.client, nil, dir)
		if err != nil {
			t.Fatalf("%s: %v", tc.client, err)
		}
		if got := providersAsked(spec); !slices.Equal(got, tc.want) {
			t.Errorf("%s: providers %s, want %s", tc.client, strings.Join(got, " "), strings.Join(tc.want, " "))
		}
	}
}

// A module directory that is there but holds no configuration file is
// an empty module to both clients (checked with `terraform init` and
// `tofu init`), a local module's or one in a registry module's package;
// one that is not there is refused, as they refuse it. Sync had refused
// the empty ones, so a configuration the clients install could not be
// synced.
func TestEmptyModuleDirectories(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"main.tf":       "module \"empty\" {\n  source = \"./empty\"\n}\n" + requiresP("1.0.0"),
		"empty/README":  "kept for later",
		"pkg/README":    "",
		"pkg/sub/x.txt": "",
	})
	for _, client := range []Client{Terraform, OpenTofu} {
		spec, err := LoadFor(client, nil, dir)
		if err != nil {
			t.Fatalf("%s: %v", client, err)
		}
		if got := len(spec.Providers); got != 1 {
			t.Errorf("%s: %d providers, want the root's one", client, got)
		}
	}

	missing := writeFiles(t, map[string]string{"main.tf": "module \"gone\" {\n  source = \"./gone\"\n}\n"})
	if _, err := Load(missing); err == nil || !strings.Contains(err.Error(), `main.tf:2: module source "./gone": no such directory`) {
		t.Errorf("a local module that is not there: %v, want refused naming it", err)
	}

	pkg := filepath.Join(dir, "pkg")
	md, err := (&Spec{}).ReadModuleDir(context.Background(), pkg, filepath.Join(pkg, "sub"), "module acme/net/aws 1.0.0")
	if err != nil || len(md.Requires) != 0 || len(md.Modules) != 0 {
		t.Errorf("an empty directory of a package: %+v, %v, want an empty module", md, err)
	}
	_, err = (&Spec{}).ReadModuleDir(context.Background(), pkg, filepath.Join(pkg, "modules", "vpc"), "module acme/net/aws 1.0.0")
	if err == nil || err.Error() != "module acme/net/aws 1.0.0: its package has no directory modules/vpc" {
		t.Errorf("a directory its package does not have: %v", err)
	}
}

// Module blocks both clients refuse (checked with `terraform init` and
// `tofu init`) are refused, naming the block's file and line, where sync
// had taken them and the sealed init then failed: a version argument
// with a source that is no registry address (a query string, a local
// directory, a go-getter source, a system not in lowercase), and, for
// OpenTofu, an empty version constraint, which Terraform takes.
func TestModuleBlocksTheClientsRefuse(t *testing.T) {
	block := func(source, version string) map[string]string {
		return map[string]string{"main.tf": fmt.Sprintf("module \"a\" {\n  source  = %q\n  version = %q\n}\n", source, version), "m/main.tf": ""}
	}
	for _, tc := range []struct {
		name    string
		files   map[string]string
		refused []Client
		want    string
	}{
		{"a query string", block("hashicorp/consul/aws?ref=v1", "1.0.0"), []Client{Terraform, OpenTofu}, `main.tf:2: module "a": source "hashicorp/consul/aws?ref=v1" is no module registry address, yet the block has a version argument`},
		{"a local directory", block("./m", "1.0.0"), []Client{Terraform, OpenTofu}, `main.tf:2: module "a": source "./m" is no module registry address`},
		{"a go-getter source", block("git::https://example.com/x.git", "1.0.0"), []Client{Terraform, OpenTofu}, `source "git::https://example.com/x.git" is no module registry address`},
		{"a system in capitals", block("hashicorp/consul/AWS", "1.0.0"), []Client{Terraform, OpenTofu}, `source "hashicorp/consul/AWS" is no module registry address`},
		{"an empty version", block("hashicorp/consul/aws", ""), []Client{OpenTofu}, `main.tf:3: module "a": an empty version constraint, which OpenTofu refuses`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, tc.files)
			for _, client := range []Client{Terraform, OpenTofu} {
				_, err := LoadFor(client, nil, dir)
				switch refused := slices.Contains(tc.refused, client); {
				case refused && (err == nil || !strings.Contains(err.Error(), tc.want)):
					t.Errorf("%s: %v, want an error containing %q", client, err, tc.want)
				case !refused && err != nil:
					t.Errorf("%s: %v, want it taken, as %s takes it", client, err, client)
				}
			}
		})
	}
}
