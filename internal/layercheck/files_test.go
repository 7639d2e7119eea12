package layercheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// goFiles returns the .go files of dir: production files or test files.
func goFiles(dir string, tests bool) ([]string, error) {
	all, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(f string) bool { return strings.HasSuffix(f, "_test.go") != tests }), nil
}

// fileImports reads the imports of the repository's packages (module mod)
// from the files of dir, a directory of the repository (its path inside it
// is the package's).
func fileImports(dir, mod string) (pkgImports, error) {
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		return pkgImports{}, err
	}
	p := pkgImports{path: filepath.ToSlash(rel)}
	for _, tests := range []bool{false, true} {
		files, err := goFiles(dir, tests)
		if err != nil {
			return pkgImports{}, err
		}
		for _, f := range files {
			file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				return pkgImports{}, err
			}
			for _, spec := range file.Imports {
				path, _ := strconv.Unquote(spec.Path.Value)
				r, ok := strings.CutPrefix(path, mod+"/")
				if !ok || r == p.path {
					continue
				}
				if tests {
					p.tests = append(p.tests, r)
				} else {
					p.imports = append(p.imports, r)
				}
			}
		}
	}
	return p, nil
}

// parseDir parses the production or test files of dir.
func parseDir(fset *token.FileSet, dir string, tests bool) ([]*ast.File, error) {
	files, err := goFiles(dir, tests)
	if err != nil {
		return nil, err
	}
	var out []*ast.File
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		out = append(out, file)
	}
	return out, nil
}
