package manifest

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// callsFile is a file of n module blocks calling registry modules
// acme/mFIRST/aws .. acme/m(FIRST+n-1)/aws, version "~> 1.0".
func callsFile(first, n int) string {
	var b strings.Builder
	for i := first; i < first+n; i++ {
		fmt.Fprintf(&b, "module \"m%d\" {\n  source  = \"acme/m%d/aws\"\n  version = \"~> 1.0\"\n}\n", i, i)
	}
	return b.String()
}

// A package's configuration makes sync follow at most
// MaxPackageModuleCalls distinct registry module calls: each is a
// version list asked of an origin and a package to fetch and read, and a
// stranger's package of hundreds of MiB could name millions. A package
// at the bound is read whole; one call more, in a local module it calls,
// refuses the package, naming the call's file:line, its module and the
// bound, and nothing of it is added to the spec. Every call of the
// package was followed, whatever their number.
func TestAddModuleDirBoundsModuleCalls(t *testing.T) {
	const max = MaxPackageModuleCalls
	const provider = "terraform {\n  required_providers {\n    x = { source = \"acme/x\" }\n  }\n}\n"
	files := map[string]string{
		"main.tf":       "module \"child\" {\n  source = \"./child\"\n}\n" + callsFile(0, max-1) + provider,
		"child/main.tf": callsFile(max-1, 1),
	}
	dir := writeFiles(t, files)
	spec := &Spec{}
	calls, err := spec.AddModuleDir(context.Background(), dir, dir, "module acme/app/aws 1.0.0")
	if err != nil {
		t.Fatalf("a package of %d registry module calls, the bound: %v", max, err)
	}
	if len(calls) != max || len(spec.Providers) != 1 {
		t.Fatalf("%d registry modules and %d providers, want %d and 1", len(calls), len(spec.Providers), max)
	}

	files["child/main.tf"] = callsFile(max-1, 2)
	dir = writeFiles(t, files)
	spec = &Spec{}
	calls, err = spec.AddModuleDir(context.Background(), dir, dir, "module acme/app/aws 1.0.0")
	want := fmt.Sprintf("child/main.tf:6: module registry.terraform.io/acme/m%d/aws: more than %d distinct registry module calls", max, max)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("a package of %d registry module calls: %v, want refused: %q", max+1, err, want)
	}
	if len(calls) != 0 || len(spec.Providers) != 0 || len(spec.Unmirrorable) != 0 {
		t.Errorf("a refused package added %d modules, %d providers, %d other sources", len(calls), len(spec.Providers), len(spec.Unmirrorable))
	}
}

// Calls of one registry module with one version constraint are one call,
// however many there are (within the bound, and from any subdirectory),
// with one selection counting them: a package repeating one call is not
// refused, and sync checks the selection, and reports it failed, once.
// Each call carried its own selection.
func TestAddModuleDirMergesRepeatedCalls(t *testing.T) {
	const n = 3 * MaxPackageModuleCalls
	var b strings.Builder
	for i := range n {
		src := "acme/shared/aws"
		if i%3 == 1 {
			src += "//modules/a"
		}
		version := "~> 1.0"
		if i%3 == 2 {
			version = "2.0.0"
		}
		fmt.Fprintf(&b, "module \"s%d\" {\n  source  = %q\n  version = %q\n}\n", i, src, version)
	}
	dir := writeFiles(t, map[string]string{"main.tf": b.String()})
	calls, err := (&Spec{}).AddModuleDir(context.Background(), dir, dir, "module acme/app/aws 1.0.0")
	if err != nil {
		t.Fatalf("%d calls of one module, in three ways: %v", n, err)
	}
	if len(calls) != 1 {
		t.Fatalf("%d modules, want acme/shared/aws alone", len(calls))
	}
	m := calls[0]
	if m.Calls != 3 || len(m.Subdirs) != 2 {
		t.Errorf("%d distinct calls, subdirectories %q; want 3, and \"\" and modules/a", m.Calls, m.Subdirs)
	}
	got := map[string]int{}
	for _, sel := range m.Selections {
		got[sel.Text] += sel.Calls
	}
	if len(m.Selections) != 2 || got["~> 1.0"] != 2*n/3 || got["2.0.0"] != n/3 {
		t.Errorf("%d selections, calls by constraint %v; want 2: %d of \"~> 1.0\", %d of \"2.0.0\"", len(m.Selections), got, 2*n/3, n/3)
	}
	if m.Selections[0].Where != "main.tf:2" && !strings.HasSuffix(m.Selections[0].Where, "/main.tf:2") {
		t.Errorf("the selection of \"~> 1.0\" is at %s, want the first call's, main.tf:2", m.Selections[0].Where)
	}
}
