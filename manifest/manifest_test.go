package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apparentlymart/go-versions/versions"
)

// available is the version list selections are resolved against.
var available = versions.List{
	versions.MustParseVersion("4.66.0"),
	versions.MustParseVersion("4.67.0"),
	versions.MustParseVersion("5.0.0"),
	versions.MustParseVersion("5.1.0"),
	versions.MustParseVersion("5.2.0-beta1"),
	versions.MustParseVersion("6.0.0"),
}

// resolved flattens a spec into "provider: v1 v2 | platforms" lines.
func resolved(s *Spec) []string {
	var out []string
	for _, p := range s.Providers {
		seen := map[string]bool{}
		var vs []string
		for _, sel := range p.Selections {
			for _, v := range sel.Select(available) {
				if !seen[v.String()] {
					seen[v.String()] = true
					vs = append(vs, v.String())
				}
			}
		}
		line := p.Address.String() + ": " + strings.Join(vs, " ")
		if len(p.Platforms) > 0 {
			line += " | " + strings.Join(p.Platforms, " ")
		}
		out = append(out, line)
	}
	return out
}

func writeFiles(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name      string
		files     map[string]string
		path      string // relative to the directory; "" = the directory
		want      []string
		platforms []string
		wantErr   string // substring; "" = success
	}{
		{
			name: "manifest with constraints, latest and platforms",
			files: map[string]string{"sync.hcl": `
platforms = ["linux_amd64", "darwin_arm64", "linux_amd64"]
provider "registry.terraform.io/hashicorp/aws" {
  versions  = [">= 5.0, < 6.0", "4.67.0"]
  platforms = ["linux_arm64"]
}
provider "example.com/acme/Widget" {
  versions = [">= 4.0"]
  latest   = 2
}
`},
			path: "sync.hcl",
			want: []string{
				"registry.terraform.io/hashicorp/aws: 5.1.0 5.0.0 4.67.0 | linux_arm64",
				"example.com/acme/widget: 6.0.0 5.1.0",
			},
			platforms: []string{"linux_amd64", "darwin_arm64"},
		},
		{
			name:  "manifest short address and exact prerelease",
			files: map[string]string{"m.hcl": `provider "hashicorp/aws" { versions = ["5.2.0-beta1"] }`},
			path:  "m.hcl",
			want:  []string{"registry.terraform.io/hashicorp/aws: 5.2.0-beta1"},
		},
		{
			name:    "manifest unknown attribute",
			files:   map[string]string{"m.hcl": "provider \"hashicorp/aws\" {\n  versions = [\"5.0.0\"]\n  version = \"5.0.0\"\n}\n"},
			path:    "m.hcl",
			wantErr: "m.hcl:3: Unsupported argument",
		},
		{
			name:    "manifest missing versions",
			files:   map[string]string{"m.hcl": "\nprovider \"hashicorp/aws\" {\n}\n"},
			path:    "m.hcl",
			wantErr: `m.hcl:2: Missing required argument: The argument "versions" is required`,
		},
		{
			name:    "manifest bad constraint",
			files:   map[string]string{"m.hcl": "provider \"hashicorp/aws\" {\n  versions = [\"~> banana\"]\n}\n"},
			path:    "m.hcl",
			wantErr: `m.hcl:2: version constraint "~> banana"`,
		},
		{
			name:    "manifest bad platform",
			files:   map[string]string{"m.hcl": "platforms = [\"linux-amd64\"]\nprovider \"hashicorp/aws\" { versions = [\"5.0.0\"] }\n"},
			path:    "m.hcl",
			wantErr: `m.hcl:1: invalid platform "linux-amd64"`,
		},
		{
			name:    "manifest bad address",
			files:   map[string]string{"m.hcl": "\n\nprovider \"aws\" { versions = [\"5.0.0\"] }\n"},
			path:    "m.hcl",
			wantErr: `m.hcl:3: provider address "aws"`,
		},
		{
			name:    "manifest duplicate provider",
			files:   map[string]string{"m.hcl": "provider \"hashicorp/aws\" { versions = [\"5.0.0\"] }\nprovider \"registry.terraform.io/hashicorp/aws\" { versions = [\"6.0.0\"] }\n"},
			path:    "m.hcl",
			wantErr: "m.hcl:2: provider registry.terraform.io/hashicorp/aws is already declared at",
		},
		{
			name:    "manifest latest not a number",
			files:   map[string]string{"m.hcl": "provider \"hashicorp/aws\" {\n  versions = [\"5.0.0\"]\n  latest = 0\n}\n"},
			path:    "m.hcl",
			wantErr: "m.hcl:3: latest must be a whole number",
		},
		{
			name:    "manifest versions not a list",
			files:   map[string]string{"m.hcl": "provider \"hashicorp/aws\" {\n  versions = \"5.0.0\"\n}\n"},
			path:    "m.hcl",
			wantErr: "m.hcl:2: versions must be a list of strings",
		},
		{
			name:    "manifest without providers",
			files:   map[string]string{"m.hcl": "platforms = [\"linux_amd64\"]\n"},
			path:    "m.hcl",
			wantErr: "no provider blocks",
		},
		{
			name:    "manifest syntax error",
			files:   map[string]string{"m.hcl": "provider \"hashicorp/aws\" {\n  versions = [\n"},
			path:    "m.hcl",
			wantErr: "m.hcl:",
		},
		{
			name: "lock file",
			files: map[string]string{LockFileName: `
# This file is maintained automatically by "terraform init".
provider "registry.terraform.io/hashicorp/aws" {
  version     = "5.0.0"
  constraints = "~> 5.0"
  hashes = [
    "h1:abc=",
  ]
}
`},
			path: LockFileName,
			want: []string{"registry.terraform.io/hashicorp/aws: 5.0.0"},
		},
		{
			name:    "lock file without version",
			files:   map[string]string{LockFileName: "provider \"registry.terraform.io/hashicorp/aws\" {\n  hashes = []\n}\n"},
			path:    LockFileName,
			wantErr: LockFileName + `:1: Missing required argument`,
		},
		{
			name:    "lock file bad version",
			files:   map[string]string{LockFileName: "provider \"registry.terraform.io/hashicorp/aws\" {\n  version = \"five\"\n}\n"},
			path:    LockFileName,
			wantErr: LockFileName + `:2: version:`,
		},
		{
			name: "directory: locked, constrained, implied and legacy providers",
			files: map[string]string{
				"main.tf": `
terraform {
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 4.0"
      configuration_aliases = [aws.east]
    }
    widget = {
      source  = "example.com/acme/widget"
      version = ">= 5.0"
    }
    legacy = "< 5.0"
  }
}
provider "google" {}
resource "google_compute_instance" "y" { z = var.q }
`,
				"versions.tf": `
terraform {
  required_providers {
    widget = {
      version = "< 6.0"
    }
  }
}
`,
				LockFileName: `provider "registry.terraform.io/hashicorp/aws" { version = "4.66.0" }`,
			},
			want: []string{
				"registry.terraform.io/hashicorp/aws: 4.66.0",
				"example.com/acme/widget: 5.1.0",
				"registry.terraform.io/hashicorp/legacy: 4.67.0",
				"registry.terraform.io/hashicorp/google: 6.0.0",
			},
		},
		{
			name:    "directory: conflicting sources",
			files:   map[string]string{"a.tf": "terraform {\n  required_providers {\n    aws = { source = \"hashicorp/aws\" }\n  }\n}\n", "b.tf": "terraform {\n  required_providers {\n    aws = { source = \"acme/aws\" }\n  }\n}\n"},
			wantErr: "b.tf:3: provider \"aws\" has two source addresses",
		},
		{
			name:    "directory: bad source",
			files:   map[string]string{"a.tf": "terraform {\n  required_providers {\n    aws = { source = \"a/b/c/d\" }\n  }\n}\n"},
			wantErr: `a.tf:3: provider address "a/b/c/d"`,
		},
		{
			name:    "directory: version not a string",
			files:   map[string]string{"a.tf": "terraform {\n  required_providers {\n    aws = {\n      version = 5\n    }\n  }\n}\n"},
			wantErr: `a.tf:4: version of provider "aws" must be a string`,
		},
		{
			name:    "empty directory",
			files:   map[string]string{"README": "nothing"},
			wantErr: "no *.tf or *.tf.json files",
		},
		{
			name: "directory: JSON syntax",
			files: map[string]string{"main.tf.json": `{
  "terraform": {"required_providers": {
    "aws": {"source": "hashicorp/aws", "version": "~> 5.0"},
    "legacy": ">= 6.0"
  }},
  "provider": {"random": {}},
  "resource": {"google_compute_instance": {"vm": {"provider": "google-beta.west"}}}
}`},
			want: []string{
				"registry.terraform.io/hashicorp/aws: 5.1.0",
				"registry.terraform.io/hashicorp/legacy: 6.0.0",
				"registry.terraform.io/hashicorp/random: 6.0.0",
				"registry.terraform.io/hashicorp/google-beta: 6.0.0",
			},
		},
		{
			name:    "directory: JSON version not a string",
			files:   map[string]string{"main.tf.json": `{"terraform": {"required_providers": {"aws": {"version": 5}}}}`},
			wantErr: `main.tf.json:1: version of provider "aws" must be a string`,
		},
		{
			name: "directory: providers implied by resources and data sources",
			files: map[string]string{"main.tf": `
resource "google_compute_instance" "a" {}
resource "aws_instance" "b" {
  provider = awsalt.west
}
data "http" "c" {}
resource "terraform_data" "d" {}
data "terraform_remote_state" "e" {}
`},
			want: []string{
				"registry.terraform.io/hashicorp/google: 6.0.0",
				"registry.terraform.io/hashicorp/awsalt: 6.0.0",
				"registry.terraform.io/hashicorp/http: 6.0.0",
			},
		},
		{
			name: "directory: local child modules, remote ones not read",
			files: map[string]string{
				"main.tf": `
terraform {
  required_providers {
    aws = { source = "hashicorp/aws", version = "~> 5.0" }
  }
}
module "net" { source = "./modules/net" }
module "vpc" { source = "terraform-aws-modules/vpc/aws" }
module "again" { source = "./" }
`,
				"modules/net/net.tf": `
terraform {
  required_providers {
    amazon = { source = "hashicorp/aws", version = ">= 5.1" }
  }
}
module "deeper" { source = "../deep" }
`,
				"modules/deep/deep.tf.json": `{"resource": {"random_id": {"x": {}}}}`,
			},
			want: []string{
				"registry.terraform.io/hashicorp/aws: 5.1.0",
				"registry.terraform.io/hashicorp/random: 6.0.0",
			},
		},
		{
			name:    "directory: local module that is not there",
			files:   map[string]string{"main.tf": "\nmodule \"net\" {\n  source = \"./modules/net\"\n}\n"},
			wantErr: `main.tf:3: module source "./modules/net": `,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, tt.files)
			spec, err := Load(filepath.Join(dir, tt.path))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := resolved(spec)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("resolved:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if strings.Join(spec.Platforms, " ") != strings.Join(tt.platforms, " ") {
				t.Errorf("platforms = %v, want %v", spec.Platforms, tt.platforms)
			}
		})
	}
}

func TestLoadMergesPaths(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a.hcl":      "platforms = [\"linux_amd64\"]\nprovider \"hashicorp/aws\" { versions = [\"5.0.0\"] }\n",
		"b.hcl":      "platforms = [\"windows_amd64\"]\nprovider \"hashicorp/aws\" {\n  versions = [\"6.0.0\"]\n  platforms = [\"linux_arm64\"]\n}\n",
		LockFileName: `provider "registry.terraform.io/hashicorp/aws" { version = "4.67.0" }`,
	})
	spec, err := Load(filepath.Join(dir, "a.hcl"), filepath.Join(dir, "b.hcl"), filepath.Join(dir, LockFileName))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(resolved(spec), "\n")
	if want := "registry.terraform.io/hashicorp/aws: 5.0.0 6.0.0 4.67.0 | linux_arm64"; got != want {
		t.Errorf("resolved %q, want %q", got, want)
	}
	if got := strings.Join(spec.Platforms, ","); got != "linux_amd64,windows_amd64" {
		t.Errorf("platforms %s", got)
	}
	if _, err := Load(filepath.Join(dir, "missing.hcl")); err == nil {
		t.Error("a missing path loaded")
	}
}

// TestManifestCLI: cli blocks name CLI products with versions and
// platforms; a provider or a malformed name is refused.
func TestManifestCLI(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.hcl")
	write := func(src string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`
platforms = ["linux_amd64"]
cli "terraform" {
  versions  = ["~> 1.11"]
  platforms = ["darwin_arm64"]
}
cli "tofu" {
  versions = [">= 1.8.0"]
  latest   = 2
}
`)
	spec, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.CLIs) != 2 || spec.CLIs[0].Product != "terraform" || spec.CLIs[1].Product != "tofu" ||
		spec.CLIs[0].Platforms[0] != "darwin_arm64" || spec.CLIs[1].Selections[0].Latest != 2 ||
		!spec.CLIs[0].Selections[0].Set.Has(versions.MustParseVersion("1.11.4")) || spec.CLIs[0].Selections[0].Set.Has(versions.MustParseVersion("2.0.0")) {
		t.Fatalf("%+v %+v", spec.CLIs[0], spec.CLIs[1])
	}
	for _, bad := range []string{`cli "terraform-provider-aws" { versions = ["1.0.0"] }`, `cli "Terraform" { versions = ["1.0.0"] }`,
		`cli "terraform" { versions = ["1.0.0"] }` + "\n" + `cli "terraform" { versions = ["1.1.0"] }`} {
		write(bad)
		if _, err := Load(path); err == nil {
			t.Errorf("accepted: %s", bad)
		}
	}
}

// TestLockFileBreakingConstraintsWarned: a configuration directory whose
// lock file locks a provider at a version its configuration's
// constraints do not allow (the constraint raised, the lock file not
// upgraded) is synced as the lock file says, as `terraform providers
// mirror` does, with a warning naming the lock file, the provider, the
// version and the constraint: `terraform init` fails there until
// -upgrade selects a version this sync did not fetch. It was synced
// without a word.
func TestLockFileBreakingConstraintsWarned(t *testing.T) {
	lock := func(version string) string {
		return "provider \"registry.terraform.io/hashicorp/null\" {\n  version = \"" + version + "\"\n  hashes = [\"h1:abc=\"]\n}\n"
	}
	config := "terraform {\n  required_providers {\n    null = {\n      source  = \"hashicorp/null\"\n      version = \"~> 3.2\"\n    }\n  }\n}\n"
	for _, tc := range []struct {
		locked string
		warned bool
	}{
		{"3.2.1", false},
		{"3.1.0", true},
	} {
		dir := writeFiles(t, map[string]string{"main.tf": config, LockFileName: lock(tc.locked)})
		spec, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(spec.Providers) != 1 || len(spec.Providers[0].Selections) != 1 || spec.Providers[0].Selections[0].Text != tc.locked {
			t.Errorf("locked at %s: synced %+v, want the locked version alone", tc.locked, spec.Providers)
		}
		if !tc.warned {
			if len(spec.Warnings) != 0 {
				t.Errorf("locked at %s, which ~> 3.2 allows: warnings %q", tc.locked, spec.Warnings)
			}
			continue
		}
		if len(spec.Warnings) != 1 {
			t.Fatalf("locked at %s, which ~> 3.2 does not allow: warnings %q, want one", tc.locked, spec.Warnings)
		}
		w := spec.Warnings[0]
		for _, want := range []string{filepath.Join(dir, LockFileName), "registry.terraform.io/hashicorp/null at 3.1.0", `"~> 3.2"`, "main.tf:3", "-upgrade"} {
			if !strings.Contains(w, want) {
				t.Errorf("warning %q lacks %q", w, want)
			}
		}
	}
}
