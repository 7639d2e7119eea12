package manifest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The providers a configuration needs are those Terraform installs for
// it (`terraform providers`): besides resource and data blocks', an
// ephemeral resource's, a data source scoped to a check block, and an
// import block's that generates its resource's configuration (the
// provider it names, or its type's), not one into a resource the module
// declares (whose provider that resource says) or into a module's. Sync
// synced none of them, and terraform init through a sealed mirror failed
// on each. What terraform providers listed for these files, and what is
// read of them in JSON too.
func TestProvidersOfEphemeralCheckAndImportBlocks(t *testing.T) {
	native := map[string]string{
		"main.tf": `
ephemeral "random_password" "x" {
  length = 8
}
check "c" {
  data "http" "h" {
    url = "https://example.com"
  }
  assert {
    condition     = data.http.h.status_code == 200
    error_message = "down"
  }
}
import {
  to = aws_instance.x
  id = "i-1"
}
resource "google_thing" "t" {
  provider = google-beta
}
import {
  to = google_thing.t
  id = "t"
}
import {
  to = module.m.azurerm_thing.a
  id = "a"
}
import {
  for_each = toset(["a"])
  to       = tls_key.k[each.key]
  id       = each.key
}
import {
  to       = foo_thing.f
  provider = bar.alias
  id       = "f"
}
ephemeral "vault_secret" "s" {
  provider = vaulty
}
import {
  to = terraform_data.d
  id = "d"
}
`,
	}
	json := map[string]string{
		"main.tf.json": `{
  "ephemeral": {"random_password": {"x": {"length": 8}}, "vault_secret": {"s": {"provider": "vaulty"}}},
  "check": {"c": {"data": {"http": {"h": {"url": "https://example.com"}}}, "assert": [{"condition": "${data.http.h.status_code == 200}", "error_message": "down"}]}},
  "resource": {"google_thing": {"t": {"provider": "google-beta"}}},
  "import": [
    {"to": "aws_instance.x", "id": "i-1"},
    {"to": "google_thing.t", "id": "t"},
    {"to": "module.m.azurerm_thing.a", "id": "a"},
    {"for_each": "${toset([\"a\"])}", "to": "tls_key.k[each.key]", "id": "${each.key}"},
    {"to": "foo_thing.f", "provider": "bar.alias", "id": "f"}
  ]
}`,
	}
	want := []string{"aws", "bar", "google-beta", "http", "random", "tls", "vaulty"}
	for name, files := range map[string]map[string]string{"native": native, "json": json} {
		t.Run(name, func(t *testing.T) {
			spec, err := Load(writeFiles(t, files))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range spec.Providers {
				if p.Address.Namespace != "hashicorp" {
					t.Errorf("provider %s, want hashicorp's", p.Address)
				}
				got = append(got, p.Address.Type)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("providers %q, want %q", got, want)
			}
		})
	}
	for _, tc := range []struct{ body, want string }{
		{"import {\n  id = \"x\"\n}\n", "main.tf:1"},
		{"import {\n  to = \"aws_instance.x\"\n  id = \"x\"\n}\n", "main.tf:2"},
		{"import {\n  to = aws_instance\n  id = \"x\"\n}\n", "main.tf:2"},
	} {
		_, err := Load(writeFiles(t, map[string]string{"main.tf": tc.body}))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want refused at %s", tc.body, err, tc.want)
		}
	}
}

// A hidden file (".old.tf", an editor's or a tool's) is no configuration
// file to Terraform and OpenTofu, which ignore it: its providers are not
// needed, nor its constraints (which here no version would meet with the
// directory's).
func TestHiddenFilesIgnored(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"main.tf":         requiresP("~> 1.0"),
		".old.tf":         requiresP("~> 2.0") + "resource \"aws_instance\" \"x\" {}\n",
		".backup.tf.json": `{"resource": {"google_thing": {"t": {}}}}`,
	})
	spec, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := selectionsOf(t, spec); strings.Join(got, "; ") != "~> 1.0: 1.9.0" {
		t.Errorf("selections %q, want main.tf's alone", got)
	}
}

// One module's import blocks import into at most maxImportTargets
// distinct resources, each held while its files are read: a stranger's
// package of hundreds of MiB could name millions. Import blocks into
// one resource are one; the module's resources are not held at all
// (the files are read again for those its imports name).
func TestImportTargetsBounded(t *testing.T) {
	imports := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "import {\n  to = aws_instance.i%d\n  id = \"x\"\n}\n", i)
		}
		return b.String() + "import {\n  to = aws_instance.i0\n  id = \"again\"\n}\n"
	}
	if _, err := Load(writeFiles(t, map[string]string{"main.tf": imports(maxImportTargets)})); err != nil {
		t.Fatalf("%d import targets: %v", maxImportTargets, err)
	}
	_, err := Load(writeFiles(t, map[string]string{"main.tf": imports(maxImportTargets + 1)}))
	if want := fmt.Sprintf("main.tf:%d", 4*maxImportTargets+1); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%d import targets: %v, want refused at %s", maxImportTargets+1, err, want)
	}
}
