package doccheck

import (
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
	funcs := map[string]map[string]string{} // package dir -> what its test files declare
	for _, r := range refs {
		dir, name := r[1], r[2]
		if funcs[dir] == nil {
			funcs[dir] = declsOf(t, filepath.Join(root, filepath.FromSlash(dir)), "*_test.go")
			if len(funcs[dir]) == 0 {
				t.Errorf("%s has no test files", dir)
			}
		}
		if funcs[dir][name] != "func" {
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
