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
func TestReadModuleDirBoundsModuleCalls(t *testing.T) {
	const max = MaxPackageModuleCalls
	const provider = "terraform {\n  required_providers {\n    x = { source = \"acme/x\" }\n  }\n}\n"
	files := map[string]string{
		"main.tf":       "module \"child\" {\n  source = \"./child\"\n}\n" + callsFile(0, max-1) + provider,
		"child/main.tf": callsFile(max-1, 1),
	}
	dir := writeFiles(t, files)
	spec := &Spec{}
	md, err := readAlone(spec, dir, dir, "module acme/app/aws 1.0.0")
	calls := md.Modules
	if err != nil {
		t.Fatalf("a package of %d registry module calls, the bound: %v", max, err)
	}
	if len(calls) != max || len(spec.Providers) != 1 {
		t.Fatalf("%d registry modules and %d providers, want %d and 1", len(calls), len(spec.Providers), max)
	}

	files["child/main.tf"] = callsFile(max-1, 2)
	dir = writeFiles(t, files)
	spec = &Spec{}
	md, err = readAlone(spec, dir, dir, "module acme/app/aws 1.0.0")
	calls = md.Modules
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
func TestReadModuleDirMergesRepeatedCalls(t *testing.T) {
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
	md, err := (&Spec{}).ReadModuleDir(context.Background(), dir, dir, "module acme/app/aws 1.0.0")
	calls := md.Modules
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

// sourcesFile is a file of n module blocks calling git repositories
// git::https://git.example.com/rFIRST.git .. r(FIRST+n-1).git.
func sourcesFile(first, n int) string {
	var b strings.Builder
	for i := first; i < first+n; i++ {
		fmt.Fprintf(&b, "module \"g%d\" {\n  source = \"git::https://git.example.com/r%d.git\"\n}\n", i, i)
	}
	return b.String()
}

// A package's configuration makes sync take at most
// MaxPackageModuleSources distinct module calls whose source is not a
// registry address: other sources (git::, URLs) by source, each a line
// sync lists, and local paths by the directory they name, each read
// once. Calls of one source, and of one directory in any spelling, are
// one, however many. A package at the bound is read whole; one source
// more, in a local module it calls, refuses the package, naming the
// call's file:line, its source and the bound, and nothing of it is added
// to the spec. Every such call of every package was taken, whatever
// their number: a stranger's package naming millions of git:: sources
// had sync list millions of lines.
func TestReadModuleDirBoundsModuleSources(t *testing.T) {
	const max = MaxPackageModuleSources
	const provider = "terraform {\n  required_providers {\n    x = { source = \"acme/x\" }\n  }\n}\n"
	var repeated strings.Builder
	for i := range 3 * max {
		fmt.Fprintf(&repeated, "module \"again%d\" {\n  source = \"git::https://git.example.com/r0.git\"\n}\n", i)
		fmt.Fprintf(&repeated, "module \"child%d\" {\n  source = \"./child%s\"\n}\n", i, strings.Repeat("/.", i%3))
	}
	files := map[string]string{
		"main.tf":       "module \"child\" {\n  source = \"./child\"\n}\n" + sourcesFile(0, max-2) + provider,
		"again.tf":      repeated.String(),
		"child/main.tf": "module \"up\" {\n  source = \"../child/../child\"\n}\n" + sourcesFile(max-2, 1),
	}
	dir := writeFiles(t, files)
	spec := &Spec{}
	md, err := readAlone(spec, dir, dir, "module acme/app/aws 1.0.0")
	others := md.Sources
	if err != nil {
		t.Fatalf("a package of %d distinct sources and local directories, the bound: %v", max, err)
	}
	if len(others) != max-1 || len(spec.Providers) != 1 {
		t.Fatalf("%d sources listed and %d providers, want %d and 1", len(others), len(spec.Providers), max-1)
	}
	if others[0] != "module acme/app/aws 1.0.0: git::https://git.example.com/r0.git" {
		t.Errorf("first source listed %q", others[0])
	}

	files["child/main.tf"] += "module \"one_more\" {\n  source = \"https://example.com/m.zip\"\n}\n"
	dir = writeFiles(t, files)
	spec = &Spec{}
	md, err = readAlone(spec, dir, dir, "module acme/app/aws 1.0.0")
	calls, others := md.Modules, md.Sources
	want := fmt.Sprintf("child/main.tf:8: module source \"https://example.com/m.zip\": more than %d distinct module calls whose source is not a registry address", max)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("a package of %d distinct sources and local directories: %v, want refused: %q", max+1, err, want)
	}
	if len(calls) != 0 || len(others) != 0 || len(spec.Providers) != 0 || len(spec.Unmirrorable) != 0 {
		t.Errorf("a refused package added %d modules, %d sources, %d providers, %d listed", len(calls), len(others), len(spec.Providers), len(spec.Unmirrorable))
	}
}

// Local directories count against MaxPackageModuleSources as other
// sources do: a package calling more distinct local directories than
// the bound is refused at the first past it, before that directory is
// looked at.
func TestReadModuleDirBoundsLocalModuleDirectories(t *testing.T) {
	const max = MaxPackageModuleSources
	files := map[string]string{}
	var b strings.Builder
	for i := range max + 1 {
		fmt.Fprintf(&b, "module \"l%d\" {\n  source = \"./l%d\"\n}\n", i, i)
		files[fmt.Sprintf("l%d/main.tf", i)] = "# calls none\n"
	}
	files["main.tf"] = b.String()
	dir := writeFiles(t, files)
	_, err := (&Spec{}).ReadModuleDir(context.Background(), dir, dir, "module acme/app/aws 1.0.0")
	want := fmt.Sprintf("main.tf:%d: module source \"./l%d\": more than %d distinct module calls", 3*max+2, max, max)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("a package calling %d local directories: %v, want refused: %q", max+1, err, want)
	}
}
