package manifest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// modulesAsked lists a spec's registry modules as "ADDRESS CONSTRAINT"
// (one line per selection, sorted) and its other module sources.
func modulesAsked(spec *Spec) []string {
	var out []string
	for _, m := range spec.Modules {
		for _, sel := range m.Selections {
			out = append(out, m.Address.String()+" "+sel.Text)
		}
	}
	for _, u := range spec.Unmirrorable {
		out = append(out, "other "+u[strings.LastIndex(u, ": ")+2:])
	}
	slices.Sort(out)
	return out
}

// With --client opentofu a module block's source and version may refer
// to the module's variables and locals, as OpenTofu evaluates them when
// it installs modules: sync takes what they evaluate to, the root
// module's variables given as tofu init takes them (defaults, then
// TF_VAR_NAME, terraform.tfvars, *.auto.tfvars in lexical order, then
// --var and --var-file in their order), a local module's by the block
// that calls it, so a local module called twice with two values is read
// for each.
func TestStaticEvaluation(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"variables.tf": `variable "ns" { default = "Acme" }
variable "dns_version" { type = string }
variable "net" {
  type    = object({ version = string })
  default = { version = "0.1.0" }
}
variable "from_env" {}
variable "from_flag" { default = "0.0.1" }
variable "from_file" { default = "0.0.1" }
variable "git_ref" { default = "v0" }
`,
		"locals.tf": `locals {
  registry = "${lower(var.ns)}"
  pin      = "= ${var.dns_version}"
  git_url  = "git::https://git.example.com/${local.registry}/infra.git?ref=${var.git_ref}"
  vpc      = replace("vpc-aws", "/-(aws)$/", "/$1")
}
`,
		"main.tf": `module "dns" {
  source  = "${local.registry}/dns/aws"
  version = local.pin
}
module "net" {
  source  = format("%s/net/aws", local.registry)
  version = var.net.version
}
module "vpc" {
  source  = "${local.registry}/${local.vpc}"
  version = var.from_env
}
module "flag" {
  source  = "acme/flag/aws"
  version = var.from_flag
}
module "file" {
  source  = "acme/file/aws"
  version = var.from_file
}
module "git" {
  source = local.git_url
}
module "blue" {
  source      = "./modules/${"app"}"
  app_version = "1.0.0"
}
module "green" {
  source      = "./modules/app"
  app_version = "2.0.0"
}
module "again" {
  source      = "./modules/app"
  app_version = "2.0.0"
}
`,
		"terraform.tfvars":         "dns_version = \"1.0.0\"\nnet = { version = \"0.2.0\" }\n",
		"b.auto.tfvars":            "dns_version = \"1.2.0\"\n",
		"a.auto.tfvars.json":       `{"dns_version": "1.1.0", "git_ref": "v1"}`,
		"modules/app/main.tf":      "variable \"app_version\" {}\nvariable \"unused\" {}\nmodule \"app\" {\n  source  = \"acme/app/aws\"\n  version = var.app_version\n}\n",
		"vars/given.tfvars":        "from_file = \"3.0.0\"\n",
		"vars/ignored.auto.tfvars": "from_file = \"9.9.9\"\n",
	})
	t.Setenv("TF_VAR_from_env", "5.0.0")
	t.Setenv("TF_VAR_from_flag", "9.9.9")
	inputs := []Input{
		{Name: "from_flag", Value: "0.0.2"},
		{File: filepath.Join(dir, "vars", "given.tfvars")},
		{Name: "from_flag", Value: "4.0.0"},
	}
	spec, err := LoadWith(Reading{Client: OpenTofu, Inputs: inputs}, nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"other git::https://git.example.com/acme/infra.git?ref=v1",
		"registry.opentofu.org/acme/app/aws 1.0.0",
		"registry.opentofu.org/acme/app/aws 2.0.0",
		"registry.opentofu.org/acme/dns/aws = 1.2.0",
		"registry.opentofu.org/acme/file/aws 3.0.0",
		"registry.opentofu.org/acme/flag/aws 4.0.0",
		"registry.opentofu.org/acme/net/aws 0.2.0",
		"registry.opentofu.org/acme/vpc/aws 5.0.0",
	}
	if got := modulesAsked(spec); !slices.Equal(got, want) {
		t.Errorf("modules asked:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// What static evaluation cannot evaluate is refused at the line that
// asks for it, saying why and, for a variable with no value, where its
// value would come from.
func TestStaticEvaluationErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"undeclared", map[string]string{"main.tf": "module \"m\" {\n  source = var.src\n}\n"},
			`main.tf:2: no variable "src" declared in`},
		{"no value", map[string]string{"main.tf": "variable \"v\" {}\nmodule \"m\" {\n  source  = \"acme/m/aws\"\n  version = var.v\n}\n"},
			`main.tf:4: variable "v" has no value: give it as tofu init takes it (sync's --var NAME=VALUE or --var-file FILE, terraform.tfvars, *.auto.tfvars, TF_VAR_NAME) or a default`},
		{"not given by the caller", map[string]string{
			"main.tf":   "module \"c\" {\n  source = \"./c\"\n}\n",
			"c/main.tf": "variable \"v\" {}\nmodule \"m\" {\n  source  = \"acme/m/aws\"\n  version = var.v\n}\n"},
			`variable "v" has no value: module "c" at `},
		{"caller's value not static", map[string]string{
			"main.tf":   "module \"c\" {\n  source = \"./c\"\n  v      = aws_vpc.main.id\n}\n",
			"c/main.tf": "variable \"v\" {}\nmodule \"m\" {\n  source  = \"acme/m/aws\"\n  version = var.v\n}\n"},
			`main.tf:3: aws_vpc is not known when modules are installed`},
		{"a cycle", map[string]string{"main.tf": "locals {\n  a = local.b\n  b = \"${local.a}x\"\n}\nmodule \"m\" {\n  source = local.a\n}\n"},
			`local.a refers to itself`},
		{"a resource", map[string]string{"main.tf": "module \"m\" {\n  source  = \"acme/m/aws\"\n  version = data.x.y.version\n}\n"},
			`main.tf:3: data is not known when modules are installed`},
		{"a provider's function", map[string]string{"main.tf": "module \"m\" {\n  source = provider::acme::src(\"x\")\n}\n"},
			`main.tf:2: Call to unknown function`},
		{"a file that is not there", map[string]string{"main.tf": "module \"m\" {\n  source = file(\"${path.module}/SOURCE\")\n}\n"},
			`main.tf:2: Error in function call`},
		{"a wrong type", map[string]string{"main.tf": "variable \"v\" {\n  type    = number\n  default = \"one\"\n}\nmodule \"m\" {\n  source  = \"acme/m/aws\"\n  version = var.v\n}\n"},
			`main.tf:1: variable "v": a number is required`},
		{"a bad tfvars file", map[string]string{"terraform.tfvars": "v = \n", "main.tf": "variable \"v\" {}\nmodule \"m\" {\n  source  = \"acme/m/aws\"\n  version = var.v\n}\n"},
			`terraform.tfvars:1`},
		{"a module calling itself", map[string]string{"main.tf": "variable \"n\" {\n  default = 0\n}\nmodule \"self\" {\n  source = \"./\"\n  n      = var.n + 1\n}\n"},
			`main.tf:5: module "self": local modules called more than 100 deep`},
		{"not a string", map[string]string{"main.tf": "locals {\n  v = [\"1.0.0\"]\n}\nmodule \"m\" {\n  source  = \"acme/m/aws\"\n  version = local.v\n}\n"},
			`main.tf:6: version of module "m" must be a string`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadFor(OpenTofu, nil, writeFiles(t, tc.files))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// What OpenTofu gives a static evaluation besides: path.module and
// path.root as tofu init run in the root module's directory has them
// ("." and a local module's directory relative to it), file() of a path
// relative to it, string tests, a JSON file's templates, and the
// workspace its .terraform directory names. Sync had taken path.module
// for the directory as given to it (a registry address, to its reading,
// for a relative one), had no file() or string tests, and took a JSON
// template as text.
func TestStaticEvaluationAsTofuInitRunThere(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"main.tf":                "module \"local\" {\n  source = \"${path.module}/modules/x\"\n}\nmodule \"net\" {\n  source  = \"acme/net/aws\"\n  version = trimspace(file(\"${path.root}/NET_VERSION\"))\n}\n",
		"NET_VERSION":            "1.2.0\n",
		"modules/x/main.tf":      "module \"y\" {\n  source  = \"acme/${path.module == \"modules/x\" ? \"y\" : \"wrong\"}/aws\"\n  version = startswith(terraform.workspace, \"stag\") ? \"2.0.0\" : \"1.0.0\"\n}\n",
		"json.tf.json":           `{"locals": {"src": "acme/json/aws"}, "module": {"j": {"source": "${local.src}", "version": "${lower(\"1.0.0\")}"}}}`,
		".terraform/environment": "staging",
	})
	t.Setenv("TF_WORKSPACE", "")
	spec, err := LoadWith(Reading{Client: OpenTofu}, nil, "./"+relTo(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"registry.opentofu.org/acme/json/aws 1.0.0",
		"registry.opentofu.org/acme/net/aws 1.2.0",
		"registry.opentofu.org/acme/y/aws 2.0.0",
	}
	if got := modulesAsked(spec); !slices.Equal(got, want) {
		t.Errorf("modules asked:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// relTo is dir relative to the working directory.
func relTo(t *testing.T, dir string) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, dir)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// The collection, set and arithmetic functions OpenTofu has without a
// provider are there in a static evaluation (one, sum, alltrue, anytrue,
// range, the set functions, ...), each refusing what OpenTofu's
// refuses; sync had refused them as unknown functions.
func TestStaticEvaluationFunctions(t *testing.T) {
	dir := writeFiles(t, map[string]string{"main.tf": `variable "pins" { default = ["1.2.0"] }
module "one" {
  source  = "acme/one/aws"
  version = one(var.pins)
}
module "bools" {
  source  = "acme/bools/aws"
  version = alltrue([true, anytrue([false, true])]) ? "2.0.0" : "0.0.1"
}
module "sum" {
  source  = "acme/sum/aws"
  version = format("%d.0.0", sum([1, 2]) * pow(2, 1))
}
module "range" {
  source  = "acme/range/aws"
  version = join(".", [for n in range(3) : tostring(n)])
}
module "sets" {
  source  = "acme/sets/aws"
  version = one(setsubtract(setunion(["1.0.0"], ["3.0.0"]), ["3.0.0"]))
}
module "none" {
  source  = "acme/none/aws"
  version = one([]) # null: no constraint, as OpenTofu takes it
}
`})
	spec, err := LoadWith(Reading{Client: OpenTofu}, nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"registry.opentofu.org/acme/bools/aws 2.0.0",
		"registry.opentofu.org/acme/none/aws any version",
		"registry.opentofu.org/acme/one/aws 1.2.0",
		"registry.opentofu.org/acme/range/aws 0.1.2",
		"registry.opentofu.org/acme/sets/aws 1.0.0",
		"registry.opentofu.org/acme/sum/aws 6.0.0",
	}
	if got := modulesAsked(spec); !slices.Equal(got, want) {
		t.Errorf("modules asked:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	for expr, want := range map[string]string{
		`one(["1.0.0", "2.0.0"])`: "no more than one element",
		`one(tolist(["1", "2"]))`: "must have no more than one element",
		`format("%d", sum([]))`:   "must be a list, set or tuple of one number at least",
	} {
		dir := writeFiles(t, map[string]string{"main.tf": "module \"m\" {\n  source  = \"acme/m/aws\"\n  version = " + expr + "\n}\n"})
		if _, err := LoadWith(Reading{Client: OpenTofu}, nil, dir); err == nil || !strings.Contains(err.Error(), "main.tf:3") || !strings.Contains(err.Error(), want) {
			t.Errorf("version = %s: %v, want refused at main.tf:3 saying %q", expr, err, want)
		}
	}
}
