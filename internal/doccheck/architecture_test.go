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

// codeRef is how ARCHITECTURE.md names code: `DIR.Name` or
// `DIR.Type.Method`, DIR a package directory relative to the root.
var codeRef = regexp.MustCompile("`((?:[a-z0-9]+/)*[a-z0-9]+)\\.([A-Za-z_][A-Za-z0-9_]*)(?:\\.([A-Za-z_][A-Za-z0-9_]*))?`")

// TestArchitectureNamesExist checks that every function, type and method
// ARCHITECTURE.md names, its request walk's included, exists in the
// package it names, so that the map cannot drift from the code.
func TestArchitectureNamesExist(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	walk := string(doc)
	if _, after, ok := strings.Cut(walk, "\n## One request, top to bottom\n"); ok {
		walk, _, _ = strings.Cut(after, "\n## ")
	} else {
		t.Fatal(`ARCHITECTURE.md has no "## One request, top to bottom" section`)
	}
	if n := len(codeRef.FindAllString(walk, -1)); n < 10 {
		t.Errorf("the request walk names %d functions and types; it should follow one request through the code by name", n)
	}
	decls := map[string]map[string]string{} // package dir -> "Name" and "Type.Method"
	checked := 0
	for _, m := range codeRef.FindAllStringSubmatch(string(doc), -1) {
		dir := m[1]
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(dir))); err != nil {
			continue // not a package: a file name such as docs/x.md
		}
		if decls[dir] == nil {
			decls[dir] = declsOf(t, filepath.Join(root, filepath.FromSlash(dir)), "*.go")
		}
		name := m[2]
		if m[3] != "" {
			name += "." + m[3]
		}
		if len(decls[dir]) == 0 {
			continue // a directory without Go code
		}
		checked++
		if decls[dir][name] == "" {
			t.Errorf("ARCHITECTURE.md names %s.%s, which %s does not declare", dir, name, dir)
		}
	}
	if checked < 20 {
		t.Errorf("checked %d names in ARCHITECTURE.md; the pattern no longer finds them", checked)
	}
}

// declsOf returns the top-level names declared in the Go files of dir
// that glob matches, and Type.Method for each method, each with its kind:
// "func", "method", "type" or "value".
func declsOf(t *testing.T, dir, glob string) map[string]string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, glob))
	names := map[string]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil || len(d.Recv.List) == 0 {
					names[d.Name.Name] = "func"
					continue
				}
				typ := d.Recv.List[0].Type
				if s, ok := typ.(*ast.StarExpr); ok {
					typ = s.X
				}
				if ix, ok := typ.(*ast.IndexExpr); ok {
					typ = ix.X
				}
				if id, ok := typ.(*ast.Ident); ok {
					names[id.Name+"."+d.Name.Name] = "method"
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						names[s.Name.Name] = "type"
						if it, ok := s.Type.(*ast.InterfaceType); ok {
							for _, m := range it.Methods.List {
								for _, n := range m.Names {
									names[s.Name.Name+"."+n.Name] = "method"
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							names[n.Name] = "value"
						}
					}
				}
			}
		}
	}
	return names
}
