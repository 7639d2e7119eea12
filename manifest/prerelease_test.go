package manifest

import (
	"context"
	"strings"
	"testing"

	"github.com/apparentlymart/go-versions/versions"
)

// A configuration may name a provider's prerelease exactly
// (version = "5.1.0-beta1"), and Terraform and OpenTofu then install
// it, judging all the configuration's constraints together
// (versions.MeetingConstraints): a constraint elsewhere that admits it
// (">= 5.0", in the directory or a registry module it calls) keeps it,
// one that does not (">= 5.2") leaves nothing, and a prerelease nobody
// names is never taken. Sync synced nothing for the first two, saying no
// version matched, where terraform init installed 5.1.0-beta1.
func TestConfigurationNamingAPrereleaseSelectsIt(t *testing.T) {
	list := versions.List{
		versions.MustParseVersion("5.0.0"),
		versions.MustParseVersion("5.1.0-beta1"),
		versions.MustParseVersion("5.2.0"),
		versions.MustParseVersion("5.3.0-rc1"),
	}
	call := "module \"net\" {\n  source  = \"acme/net/aws\"\n  version = \"~> 1.0\"\n}\n"
	module := func(constraint string) func(Call) (ModuleDir, bool) {
		return func(c Call) (ModuleDir, bool) {
			dir := writeFiles(t, map[string]string{"main.tf": requiresP(constraint)})
			md, err := (&Spec{}).ReadModuleDir(context.Background(), dir, dir, "module acme/net/aws 1.0.0")
			if err != nil {
				t.Error(err)
			}
			return md, err == nil
		}
	}
	for _, tc := range []struct {
		name, root, module string
		want               string // each selection's text and what it takes
	}{
		{"alone", "5.1.0-beta1", "", "p 5.1.0-beta1: 5.1.0-beta1"},
		{"a local module admitting it", "5.1.0-beta1", "", "p 5.1.0-beta1, >= 5.0: 5.1.0-beta1"},
		{"a module admitting it", "5.1.0-beta1", ">= 5.0", "p 5.1.0-beta1, >= 5.0: 5.1.0-beta1"},
		{"named by a module", ">= 5.0", "5.1.0-beta1", "p >= 5.0, 5.1.0-beta1: 5.1.0-beta1"},
		{"a module excluding it", "5.1.0-beta1", ">= 5.2", "p 5.1.0-beta1, >= 5.2: none"},
		{"named by nobody", ">= 5.0", "< 6.0", "p >= 5.0, < 6.0: 5.2.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"main.tf": requiresP(tc.root)}
			if strings.HasPrefix(tc.name, "a local module") {
				files["main.tf"] += "module \"c\" {\n  source = \"./child\"\n}\n"
				files["child/main.tf"] = requiresP(">= 5.0")
			}
			if tc.module != "" {
				files["main.tf"] += call
			}
			spec, err := Load(writeFiles(t, files))
			if err != nil {
				t.Fatal(err)
			}
			if tc.module != "" {
				spec.AddConfigSelections(module(tc.module))
			}
			if got := taken(spec, list); strings.Join(got, "; ") != tc.want {
				t.Errorf("selections %q, want %q", got, tc.want)
			}
		})
	}
}
