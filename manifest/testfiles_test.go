package manifest

import (
	"strings"
	"testing"
)

// The module a test file's run block loads is installed by `terraform
// init` with the configuration, and the providers it asks are the
// configuration's, their constraints all applying (`terraform providers`
// lists them under test.tests.NAME.run.NAME): sync read no test file, and
// the configuration's `terraform init` through a sealed mirror found
// neither. Test files are read in the directory and in its tests
// directory, native and JSON; a run block's local source is the
// configuration directory's; a test file's provider blocks ask nothing
// (Terraform's rule), and hidden files are not read.
func TestRunBlockModulesOfTestFiles(t *testing.T) {
	files := map[string]string{
		"main.tf":               requiresP(">= 1.5"),
		"setup/main.tf":         requiresP("< 2.0.0") + "resource \"q_thing\" \"x\" {}\n",
		"tests/a.tftest.hcl":    "provider \"unused\" {}\nrun \"setup\" {\n  module {\n    source = \"./setup\"\n  }\n}\nrun \"plain\" {}\n",
		"b.tftest.json":         `{"run": {"reg": {"module": {"source": "acme/thing/aws", "version": "1.0.0"}}}}`,
		"tests/.old.tftest.hcl": "run \"gone\" {\n  module {\n    source = \"./missing\"\n  }\n}\n",
	}
	spec, err := Load(writeFiles(t, files))
	if err != nil {
		t.Fatal(err)
	}
	want := "registry.terraform.io/acme/p >= 1.5, < 2.0.0: 1.9.0; registry.terraform.io/hashicorp/q any version: 2.3.0"
	if got := strings.Join(takenAt(spec), "; "); got != want {
		t.Errorf("selections %q, want %q", got, want)
	}
	if len(spec.Modules) != 1 || spec.Modules[0].Address.String() != "registry.terraform.io/acme/thing/aws" {
		t.Errorf("modules %v, want acme/thing/aws, which b.tftest.json's run block loads", spec.Modules)
	}
	if len(spec.Configs) != 1 || len(spec.Configs[0].Calls) != 1 {
		t.Errorf("the configuration's registry module calls: %+v, want the run block's", spec.Configs)
	}

	// OpenTofu: a .tofutest.hcl stands in for the .tftest.hcl of its name.
	files["tests/a.tofutest.hcl"] = "run \"setup\" {\n  module {\n    source = \"./other\"\n  }\n}\n"
	files["other/main.tofu"] = requiresP("1.0.0")
	spec, err = LoadFor(OpenTofu, nil, writeFiles(t, files))
	if err != nil {
		t.Fatal(err)
	}
	want = "registry.opentofu.org/acme/p >= 1.5, 1.0.0: none"
	if got := strings.Join(takenAt(spec), "; "); got != want {
		t.Errorf("OpenTofu's selections %q, want %q", got, want)
	}
}

// A run block's module that is not there, or that names no source, is
// refused at its file and line, as the clients refuse it.
func TestRunBlockModuleErrors(t *testing.T) {
	for _, tc := range []struct {
		name, test, want string
	}{
		{"missing", "run \"a\" {\n  module {\n    source = \"./missing\"\n  }\n}\n", `a.tftest.hcl:3: module source "./missing"`},
		{"no source", "run \"a\" {\n  module {\n  }\n}\n", `a.tftest.hcl:2: the module of run "a" has no source`},
		{"not a string", "run \"a\" {\n  module {\n    source = 3\n  }\n}\n", `a.tftest.hcl:3: source of the module of run "a" must be a string`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(writeFiles(t, map[string]string{"main.tf": requiresP("1.0.0"), "tests/a.tftest.hcl": tc.test}))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// Read as OpenTofu reads it, a test file's provider block asks for its
// provider, by the root module's local name (or hashicorp/NAME), with
// the block's version constraint, as `tofu providers` lists it under
// test.tests.NAME; read as Terraform reads it, it asks nothing, as
// `terraform providers` lists none.
func TestProviderBlocksOfTestFiles(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"main.tf":            requiresP(">= 1.5"),
		"tests/a.tftest.hcl": "provider \"p\" {\n  version = \"< 2.0.0\"\n}\nprovider \"http\" {}\nrun \"x\" {}\n",
	})
	for _, tc := range []struct {
		client Client
		want   string
	}{
		{Terraform, "registry.terraform.io/acme/p >= 1.5: 2.3.0"},
		{OpenTofu, "registry.opentofu.org/acme/p >= 1.5, < 2.0.0: 1.9.0; registry.opentofu.org/hashicorp/http any version: 2.3.0"},
	} {
		spec, err := LoadFor(tc.client, nil, dir)
		if err != nil {
			t.Fatalf("%s: %v", tc.client, err)
		}
		if got := strings.Join(takenAt(spec), "; "); got != tc.want {
			t.Errorf("%s: selections %q, want %q", tc.client, got, tc.want)
		}
	}
}
