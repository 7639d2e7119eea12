package manifest

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// OpenTofu reads a module's *.tofu and *.tofu.json files besides its
// *.tf and *.tf.json, and ignores NAME.tf where NAME.tofu stands beside
// it (NAME.tf.json where NAME.tofu.json does); Terraform reads neither.
// Both ignore hidden files; an override file may be either.
func TestConfigFilesOfEachClient(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"main.tf":            "",
		"versions.tf":        "",
		"versions.tofu":      "",
		"vars.tf.json":       "{}",
		"vars.tofu.json":     "{}",
		"extra.tofu.json":    "{}",
		"only.tf.json":       "{}",
		"override.tofu":      "",
		"b_override.tf":      "",
		".hidden.tofu":       "",
		"notes.tofu.txt":     "",
		"versions.tofu.json": "{}", // stands in for versions.tf.json, not versions.tf
	})
	names := func(files []string) string {
		var out []string
		for _, f := range files {
			out = append(out, filepath.Base(f))
		}
		return strings.Join(out, " ")
	}
	files, hasTofu, err := configFiles(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(files), "b_override.tf main.tf only.tf.json vars.tf.json versions.tf"; got != want || !hasTofu {
		t.Errorf("Terraform reads %q (files only OpenTofu reads: %v), want %q (true)", got, hasTofu, want)
	}
	files, _, err = configFiles(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(files), "b_override.tf extra.tofu.json main.tf only.tf.json override.tofu vars.tofu.json versions.tofu versions.tofu.json"; got != want {
		t.Errorf("OpenTofu reads %q, want %q", got, want)
	}
	if !isOverride(filepath.Join(dir, "override.tofu")) || !isOverride(filepath.Join(dir, "a_override.tofu.json")) {
		t.Error("override.tofu and a_override.tofu.json are not override files")
	}
	if _, hasTofu, _ := configFiles(writeFiles(t, map[string]string{"main.tf": "", ".x.tofu": ""}), false); hasTofu {
		t.Error("a hidden .tofu file counted as one OpenTofu reads")
	}
}

// A directory named as a configuration file ("modules.tf/") is not
// read, as neither client reads one: sync refused the configuration
// ("modules.tf is a directory, not a regular file") where `terraform
// init` installs it.
func TestDirectoryNamedAsAConfigurationFile(t *testing.T) {
	dir := writeFiles(t, map[string]string{"main.tf": requiresP("1.0.0"), "modules.tf/x.tf": "", "tests/a.tftest.hcl/x": ""})
	for _, client := range []Client{Terraform, OpenTofu} {
		spec, err := LoadFor(client, nil, dir)
		if err != nil {
			t.Fatalf("%s: %v", client, err)
		}
		if got := takenAt(spec); len(got) != 1 {
			t.Errorf("%s: selections %q, want main.tf's", client, got)
		}
	}
}

// A configuration directory read as OpenTofu reads it (sync --client
// opentofu) is what `tofu init` installs for it: its .tofu files read,
// each standing in for the .tf of its name, and an address naming no
// host OpenTofu's registry's; read as Terraform reads it, the .tofu
// files are not. Sync had read every directory as Terraform does, and a
// `tofu init` through a sealed mirror found neither the versions its
// .tofu files asked nor any provider of registry.opentofu.org.
func TestLoadForEachClient(t *testing.T) {
	const tf, tofu = "registry.terraform.io/acme/p", "registry.opentofu.org/acme/p"
	for _, tc := range []struct {
		name            string
		files           map[string]string
		terraform, open []string
	}{
		{"a .tofu file standing in for a .tf", map[string]string{
			"versions.tf":   requiresP("~> 1.0"),
			"versions.tofu": requiresP("~> 2.0"),
		}, []string{tf + " ~> 1.0: 1.9.0"}, []string{tofu + " ~> 2.0: 2.3.0"}},
		{"a .tofu file beside the .tf files", map[string]string{
			"versions.tf": requiresP("< 2.0.0"),
			"extra.tofu":  requiresP("!= 1.9.0"),
		}, []string{tf + " < 2.0.0: 1.9.0"}, []string{tofu + " != 1.9.0, < 2.0.0: 1.7.0"}},
		{"JSON", map[string]string{
			"versions.tf.json":   `{"terraform": {"required_providers": {"p": {"source": "acme/p", "version": "~> 1.0"}}}}`,
			"versions.tofu.json": `{"terraform": {"required_providers": {"p": {"source": "acme/p", "version": "1.5.0"}}}}`,
		}, []string{tf + " ~> 1.0: 1.9.0"}, []string{tofu + " 1.5.0: 1.5.0"}},
		{"an override file of OpenTofu's", map[string]string{
			"versions.tf":   requiresP("~> 1.0"),
			"override.tofu": requiresP("2.0.0"),
		}, []string{tf + " ~> 1.0: 1.9.0"}, []string{tofu + " 2.0.0: 2.0.0"}},
		{"a provider a resource implies", map[string]string{
			"main.tf": "resource \"p_thing\" \"x\" {}\n",
		}, []string{"registry.terraform.io/hashicorp/p any version: 2.3.0"}, []string{"registry.opentofu.org/hashicorp/p any version: 2.3.0"}},
		{"a source naming its host", map[string]string{
			"main.tf": strings.Replace(requiresP("1.0.0"), `"acme/p"`, `"registry.terraform.io/acme/p"`, 1),
		}, []string{tf + " 1.0.0: 1.0.0"}, []string{tf + " 1.0.0: 1.0.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []struct {
				client Client
				want   []string
			}{{Terraform, tc.terraform}, {OpenTofu, tc.open}} {
				spec, err := LoadFor(c.client, nil, writeFiles(t, tc.files))
				if err != nil {
					t.Fatalf("%s: %v", c.client, err)
				}
				if got := takenAt(spec); strings.Join(got, "; ") != strings.Join(c.want, "; ") {
					t.Errorf("%s: selections %q, want %q", c.client, got, c.want)
				}
			}
		})
	}
}

// A registry module call in a configuration OpenTofu reads names
// OpenTofu's registry when its source names no host.
func TestModuleSourceOfEachClient(t *testing.T) {
	files := map[string]string{"main.tf": "module \"net\" {\n  source  = \"acme/net/aws\"\n  version = \"1.0.0\"\n}\n"}
	for client, want := range map[Client]string{Terraform: "registry.terraform.io/acme/net/aws", OpenTofu: "registry.opentofu.org/acme/net/aws"} {
		spec, err := LoadFor(client, nil, writeFiles(t, files))
		if err != nil {
			t.Fatal(err)
		}
		if len(spec.Modules) != 1 || spec.Modules[0].Address.String() != want {
			t.Errorf("%s: modules %v, want %s", client, spec.Modules, want)
		}
	}
}

// A directory, or a local module, holding .tofu files only is
// OpenTofu's: read as OpenTofu reads it, it gives what its files ask;
// read as Terraform reads it, the directory is refused, saying how to
// read it as OpenTofu does, and the local module is an empty one, as
// Terraform takes it. A .tofu file OpenTofu cannot read is refused, naming
// its file and line, where Terraform does not read it.
func TestLoadOfOpenTofuOnlyFiles(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
		tfErr string
	}{
		{"a directory", map[string]string{"main.tofu": requiresP("~> 1.6.0")},
			"registry.opentofu.org/acme/p ~> 1.6.0: 1.6.0", "no *.tf or *.tf.json files (its *.tofu files are OpenTofu's, which sync reads with --client opentofu) and no .terraform.lock.hcl"},
		{"a local module", map[string]string{
			"main.tf":         "module \"c\" {\n  source = \"./c\"\n}\n",
			"c/versions.tofu": requiresP("1.0.0"),
		}, "registry.opentofu.org/acme/p 1.0.0: 1.0.0", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, tc.files)
			spec, err := LoadFor(OpenTofu, nil, dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := takenAt(spec); strings.Join(got, "; ") != tc.want {
				t.Errorf("selections %q, want %q", got, tc.want)
			}
			spec, err = Load(dir)
			switch {
			case tc.tfErr == "" && err != nil:
				t.Errorf("read as Terraform reads it: %v", err)
			case tc.tfErr == "" && len(takenAt(spec)) != 0:
				t.Errorf("read as Terraform reads it: selections %q, want none", takenAt(spec))
			case tc.tfErr != "" && (err == nil || !strings.Contains(err.Error(), tc.tfErr)):
				t.Errorf("read as Terraform reads it: %v, want an error containing %q", err, tc.tfErr)
			}
		})
	}

	dir := writeFiles(t, map[string]string{
		"main.tf":       requiresP("~> 1.0"),
		"versions.tofu": "terraform {\n  required_providers {\n    p = 3\n  }\n}\n",
	})
	if _, err := LoadFor(OpenTofu, nil, dir); err == nil || !strings.Contains(err.Error(), "versions.tofu:3") {
		t.Errorf("a .tofu file OpenTofu cannot read: %v, want refused naming versions.tofu:3", err)
	}
	if _, err := Load(dir); err != nil {
		t.Errorf("read as Terraform reads it, which ignores versions.tofu: %v", err)
	}
	_, err := LoadFor(OpenTofu, nil, writeFiles(t, map[string]string{"README.md": "", "x.tofu.bak": ""}))
	if err == nil || !strings.Contains(err.Error(), "no *.tf, *.tf.json, *.tofu or *.tofu.json files") {
		t.Errorf("no configuration file: %v", err)
	}
}

// A registry module's package is read as the spec's client reads it:
// its .tofu files, and OpenTofu's registry for an address naming none,
// both for the providers it asks and the modules it calls.
func TestModulePackageOfEachClient(t *testing.T) {
	pkg := writeFiles(t, map[string]string{
		"versions.tf":   requiresP("< 2.0.0"),
		"versions.tofu": requiresP(">= 2.0.0"),
		"calls.tofu":    "module \"dns\" {\n  source  = \"acme/dns/aws\"\n  version = \"1.0.0\"\n}\n",
	})
	for _, tc := range []struct {
		client         Client
		taken, modules string
	}{
		{Terraform, "registry.terraform.io/acme/p < 2.0.0: 1.9.0", ""},
		{OpenTofu, "registry.opentofu.org/acme/p >= 2.0.0: 2.3.0", "registry.opentofu.org/acme/dns/aws"},
	} {
		spec := &Spec{Client: tc.client}
		md, err := readAlone(spec, pkg, pkg, "module acme/app/aws 1.0.0")
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(takenAt(spec), "; "); got != tc.taken {
			t.Errorf("%s: selections %q, want %q", tc.client, got, tc.taken)
		}
		var mods []string
		for _, m := range md.Modules {
			mods = append(mods, m.Address.String())
		}
		if got := strings.Join(mods, " "); got != tc.modules {
			t.Errorf("%s: modules called %q, want %q", tc.client, got, tc.modules)
		}
	}
}

// A module source or version that refers to a variable or a local is
// refused at its line, naming what it refers to and what to do, where
// sync said only that it must be a string: by Terraform, which refuses
// it too, and in a registry module package read with OpenTofu, whose
// caller's values sync does not follow (TestStaticEvaluation has
// OpenTofu's reading of the operator's own configuration).
func TestModuleSourceFromAVariable(t *testing.T) {
	const what = "(it refers to %s: sync evaluates variables and locals as OpenTofu does with --client opentofu, in the configuration directories it is given, not in the registry module packages it fetches; else name the module and its version in a sync manifest)"
	for _, tc := range []struct {
		name, module, want string
	}{
		{"source", "  source = var.src\n", "main.tf:2: source of module \"m\" must be a string " + fmt.Sprintf(what, "var.src")},
		{"version", "  source  = \"acme/m/aws\"\n  version = local.v\n", "main.tf:3: version of module \"m\" must be a string " + fmt.Sprintf(what, "local.v")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"main.tf": "module \"m\" {\n" + tc.module + "}\n"})
			if _, err := LoadFor(Terraform, nil, dir); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("terraform: error %v, want one containing %q", err, tc.want)
			}
			if _, err := readAlone(&Spec{Client: OpenTofu}, dir, dir, "module acme/app/aws 1.0.0"); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("opentofu, a module package: error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
