package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// testRef is how SECURITY.md names a test: `PACKAGE-DIR.TestName`, the
// directory relative to the repository's root.
var testRef = regexp.MustCompile("`((?:[a-z0-9]+/)*[a-z0-9]+)\\.((?:Test|Fuzz)[A-Za-z0-9_]+)`")

// TestSecurityNamesTestsThatExist reads SECURITY.md and checks that every
// test it names as the proof of a promise is a test function of the
// package it names, and that each boundary names at least one.
func TestSecurityNamesTestsThatExist(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "SECURITY.md"))
	if err != nil {
		t.Fatal(err)
	}
	refs := testRef.FindAllStringSubmatch(string(doc), -1)
	if len(refs) < 20 {
		t.Fatalf("SECURITY.md names %d tests; each promise must name the test that proves it", len(refs))
	}
	funcs := map[string]map[string]bool{} // package dir -> test functions
	for _, r := range refs {
		dir, name := r[1], r[2]
		if funcs[dir] == nil {
			funcs[dir] = testFuncs(t, filepath.Join(root, filepath.FromSlash(dir)))
		}
		if !funcs[dir][name] {
			t.Errorf("SECURITY.md names %s.%s, which is not a test of %s", dir, name, dir)
		}
	}
	// Each boundary (a "### " heading under "## Boundaries") names a test.
	_, after, ok := strings.Cut(string(doc), "\n## Boundaries\n")
	if !ok {
		t.Fatal(`SECURITY.md has no "## Boundaries" section`)
	}
	after, _, _ = strings.Cut(after, "\n## ")
	sections := strings.Split(after, "\n### ")[1:]
	if len(sections) < 9 {
		t.Errorf("SECURITY.md describes %d boundaries, want at least the 9 the threat model lists", len(sections))
	}
	for _, s := range sections {
		title, _, _ := strings.Cut(s, "\n")
		if !testRef.MatchString(s) {
			t.Errorf("the boundary %q names no test", title)
		}
	}
}

// testFuncs returns the names of the top-level Test and Fuzz functions in
// the _test.go files of dir.
func testFuncs(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil || len(files) == 0 {
		t.Errorf("%s has no test files (%v)", dir, err)
		return map[string]bool{}
	}
	names := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
				names[fd.Name.Name] = true
			}
		}
	}
	return names
}
