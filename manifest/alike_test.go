package manifest

import (
	"strings"
	"testing"
)

// The spec holds the selections of a provider or a module that are alike
// (one constraint, one Latest) as one, counting how many asked for it
// and keeping where the first asked: three directories requiring acme/p
// "~> 1.0" and one "~> 2.0" are two selections, the first asked three
// times, and the module the four call alike is one selection of four
// calls. Sync checks each against the version list once, and reports
// one that nothing meets once, with its number.
func TestSpecMergesAlikeSelections(t *testing.T) {
	call := "module \"net\" {\n  source  = \"acme/net/aws\"\n  version = \"~> 1.0\"\n}\n"
	var dirs []string
	for _, c := range []string{"~> 1.0", "~> 1.0", "~> 2.0", "~> 1.0"} {
		dirs = append(dirs, writeFiles(t, map[string]string{"main.tf": requiresP(c) + call}))
	}
	spec, err := Load(dirs...)
	if err != nil {
		t.Fatal(err)
	}
	if got := selectionsOf(t, spec); strings.Join(got, "; ") != "~> 1.0: 1.9.0; ~> 2.0: 2.3.0" {
		t.Fatalf("selections %q, want the two constraints once each", got)
	}
	first := spec.Providers[0].Selections[0]
	if first.Calls != 3 || !strings.HasPrefix(first.Where, dirs[0]) {
		t.Errorf("~> 1.0 counted %d calls at %s, want 3, the first in %s", first.Calls, first.Where, dirs[0])
	}
	if n := spec.Providers[0].Selections[1].Calls; n > 1 {
		t.Errorf("~> 2.0 counted %d calls, want the one", n)
	}
	if len(spec.Modules) != 1 || len(spec.Modules[0].Selections) != 1 || spec.Modules[0].Selections[0].Calls != 4 {
		t.Fatalf("modules %+v, want acme/net/aws once, one selection of 4 calls", spec.Modules)
	}
}
