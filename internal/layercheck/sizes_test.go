package layercheck

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The size limits: above them a type or a package is to be split, unless
// sizes.txt lists it as a current exception.
const (
	maxMethods = 30   // per production type
	maxLines   = 3500 // per production package
)

// typeSize is what counts against a type: its methods (unexported ones
// included) and the functions whose first parameter is the type or a
// pointer to it, for turning a method into such a function is no split.
type typeSize struct {
	name             string // package.Type
	methods, asFirst int
}

func (s typeSize) total() int { return s.methods + s.asFirst }

// pkgSize is a production package's size: the lines of its files but
// its tests, and its types.
type pkgSize struct {
	path         string
	files, lines int
	types        []typeSize
}

// baseTypeName is the name of the type expr names, through a pointer and
// type parameters, or "".
func baseTypeName(expr ast.Expr) string {
	for {
		switch e := expr.(type) {
		case *ast.StarExpr:
			expr = e.X
		case *ast.IndexExpr:
			expr = e.X
		case *ast.IndexListExpr:
			expr = e.X
		case *ast.ParenExpr:
			expr = e.X
		case *ast.Ident:
			return e.Name
		default:
			return ""
		}
	}
}

// measure counts the methods of the types of one package (its production
// files); lines is the number of lines of those files.
func measure(path string, fset *token.FileSet, files []*ast.File, lines int) pkgSize {
	ps := pkgSize{path: path, files: len(files), lines: lines}
	declared := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				for _, s := range g.Specs {
					declared[s.(*ast.TypeSpec).Name.Name] = true
				}
			}
		}
	}
	counts := map[string]*typeSize{}
	count := func(name string) *typeSize {
		if counts[name] == nil {
			counts[name] = &typeSize{name: path + "." + name}
		}
		return counts[name]
	}
	// A function defined once per platform (files with build constraints)
	// counts once.
	seen := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || seen[recvKey(fd)] {
				continue
			}
			seen[recvKey(fd)] = true
			if fd.Recv != nil && len(fd.Recv.List) == 1 {
				if name := baseTypeName(fd.Recv.List[0].Type); name != "" {
					count(name).methods++
				}
				continue
			}
			if params := fd.Type.Params.List; len(params) > 0 {
				first := params[0].Type
				if star, ok := first.(*ast.StarExpr); ok {
					first = star.X
				}
				if id, ok := first.(*ast.Ident); ok && declared[id.Name] {
					count(id.Name).asFirst++
				}
			}
		}
	}
	for _, c := range counts {
		ps.types = append(ps.types, *c)
	}
	slices.SortFunc(ps.types, func(a, b typeSize) int {
		return cmp.Or(cmp.Compare(b.total(), a.total()), strings.Compare(a.name, b.name))
	})
	return ps
}

// recvKey names fd with its receiver's type, if any.
func recvKey(fd *ast.FuncDecl) string {
	if fd.Recv != nil && len(fd.Recv.List) == 1 {
		return baseTypeName(fd.Recv.List[0].Type) + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// measureDir measures the production files of the package in dir.
func measureDir(path, dir string) (pkgSize, error) {
	names, err := goFiles(dir, false)
	if err != nil {
		return pkgSize{}, err
	}
	lines := 0
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return pkgSize{}, err
		}
		lines += bytes.Count(b, []byte("\n"))
		if len(b) > 0 && b[len(b)-1] != '\n' {
			lines++
		}
	}
	fset := token.NewFileSet()
	files, err := parseDir(fset, dir, false)
	if err != nil {
		return pkgSize{}, err
	}
	return measure(path, fset, files, lines), nil
}

// oversized returns what exceeds the limits, keyed as sizes.txt lists
// exceptions ("package PATH", "type PACKAGE.TYPE"), with the figures.
func oversized(sizes []pkgSize) map[string]string {
	over := map[string]string{}
	for _, ps := range sizes {
		if ps.lines > maxLines {
			over["package "+ps.path] = fmt.Sprintf("%d lines, above the limit of %d: split the package", ps.lines, maxLines)
		}
		for _, ts := range ps.types {
			if ts.total() > maxMethods {
				over["type "+ts.name] = fmt.Sprintf("%d methods (%d of them functions taking it first), above the limit of %d: split the type", ts.total(), ts.asFirst, maxMethods)
			}
		}
	}
	return over
}

// parseExceptions reads sizes.txt: "package PATH  why" and
// "type PACKAGE.TYPE  why" lines, comments and blank lines.
func parseExceptions(text string) (map[string]string, error) {
	ex := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		kind, rest, _ := strings.Cut(line, " ")
		name, why, _ := strings.Cut(strings.TrimSpace(rest), " ")
		why = strings.TrimSpace(why)
		if (kind != "package" && kind != "type") || name == "" || why == "" {
			return nil, fmt.Errorf("line %d: want `package PATH  why` or `type PACKAGE.TYPE  why`, got %q", n, line)
		}
		key := kind + " " + name
		if _, dup := ex[key]; dup {
			return nil, fmt.Errorf("line %d: %s listed twice", n, key)
		}
		ex[key] = why
	}
	return ex, sc.Err()
}

// report is the sizes as a text table: every production package, and the
// types with at least minShown methods.
func report(sizes []pkgSize, over map[string]string) string {
	const minShown = 15
	var b strings.Builder
	mark := func(key string) string {
		if over[key] != "" {
			return "  over the limit"
		}
		return ""
	}
	sizes = slices.Clone(sizes)
	slices.SortFunc(sizes, func(a, b pkgSize) int { return cmp.Or(cmp.Compare(b.lines, a.lines), strings.Compare(a.path, b.path)) })
	total := 0
	fmt.Fprintf(&b, "lines per production package (limit %d; tests not counted):\n", maxLines)
	fmt.Fprintf(&b, "  %-24s %6s %6s\n", "package", "lines", "files")
	for _, ps := range sizes {
		total += ps.lines
		fmt.Fprintf(&b, "  %-24s %6d %6d%s\n", ps.path, ps.lines, ps.files, mark("package "+ps.path))
	}
	fmt.Fprintf(&b, "  %-24s %6d\n", "all", total)
	var types []typeSize
	for _, ps := range sizes {
		for _, ts := range ps.types {
			if ts.total() >= minShown {
				types = append(types, ts)
			}
		}
	}
	slices.SortFunc(types, func(a, b typeSize) int {
		return cmp.Or(cmp.Compare(b.total(), a.total()), strings.Compare(a.name, b.name))
	})
	fmt.Fprintf(&b, "methods per production type, those with %d or more (limit %d, counting unexported methods and functions taking the type first):\n", minShown, maxMethods)
	fmt.Fprintf(&b, "  %-24s %6s %8s %10s\n", "type", "count", "methods", "functions")
	for _, ts := range types {
		fmt.Fprintf(&b, "  %-24s %6d %8d %10d%s\n", ts.name, ts.total(), ts.methods, ts.asFirst, mark("type "+ts.name))
	}
	return b.String()
}

// TestSizes measures every production package (every package of the
// layer table but the tests layer) and fails on a package above maxLines
// lines or a type above maxMethods methods that sizes.txt does not list,
// and on an exception sizes.txt lists that is no longer one. With -v it
// prints the report.
func TestSizes(t *testing.T) {
	text, err := os.ReadFile("layers.txt")
	if err != nil {
		t.Fatal(err)
	}
	tb, err := parseTable(string(text))
	if err != nil {
		t.Fatalf("layers.txt: %v", err)
	}
	var sizes []pkgSize
	for path, layer := range tb.layerOf {
		if tb.layers[layer] == testsLayer {
			continue
		}
		ps, err := measureDir(path, filepath.Join(root, filepath.FromSlash(path)))
		if err != nil {
			t.Fatal(err)
		}
		if ps.files == 0 {
			t.Errorf("%s: no production files (is it in the right layer of layers.txt?)", path)
		}
		sizes = append(sizes, ps)
	}
	if len(sizes) < 20 {
		t.Fatalf("measured %d production packages", len(sizes))
	}
	exText, err := os.ReadFile("sizes.txt")
	if err != nil {
		t.Fatal(err)
	}
	exceptions, err := parseExceptions(string(exText))
	if err != nil {
		t.Fatalf("sizes.txt: %v", err)
	}
	over := oversized(sizes)
	t.Logf("\n%s", report(sizes, over))
	for _, m := range knownDiff("sizes.txt", over, exceptions) {
		t.Error(m)
	}
}

// TestMeasureCounts measures a package built for it: methods on the type
// and its pointer, generic receivers and functions taking the type first
// count; functions taking it second, or taking another package's type of
// the same name, do not. Above the limit, the type and the package are
// reported.
func TestMeasureCounts(t *testing.T) {
	var src strings.Builder
	src.WriteString(`package p

import "other"

type T struct{}
type G[K comparable] struct{}

func (T) a()                  {}
func (*T) b()                 {}
func f(t *T, n int)           {}
func g(v T)                   {}
func h(n int, t *T)           {}
func k(o other.T)             {}
func (g *G[K]) m()            {}
func (g *G[K]) m()            {} // as in a second file, for another platform
func (g G[K]) n()             {}
func NewT() *T                { return nil }
`)
	for i := range maxMethods - 3 {
		fmt.Fprintf(&src, "func (*T) x%d() {}\n", i)
	}
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "p.go", src.String(), parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	ps := measure("x/p", fset, []*ast.File{file}, maxLines+1)
	want := []typeSize{{name: "x/p.T", methods: maxMethods - 1, asFirst: 2}, {name: "x/p.G", methods: 2}}
	if !slices.Equal(ps.types, want) {
		t.Fatalf("types %+v, want %+v", ps.types, want)
	}
	over := oversized([]pkgSize{ps})
	if len(over) != 2 || !strings.Contains(over["type x/p.T"], "31 methods (2 of them functions") || over["package x/p"] == "" {
		t.Errorf("oversized: %q, want type x/p.T and package x/p", over)
	}
	ps.lines, ps.types = maxLines, ps.types[:1]
	ps.types[0].asFirst = 1
	if over := oversized([]pkgSize{ps}); len(over) != 0 {
		t.Errorf("at the limits, oversized says %q", over)
	}
}

// TestParseExceptionsRefuses: a sizes.txt line the test could misread is refused.
func TestParseExceptionsRefuses(t *testing.T) {
	for _, c := range []struct{ name, text string }{
		{"no reason", "type mirror.Engine\n"},
		{"unknown kind", "func mirror.New  why\n"},
		{"listed twice", "package mirror  a\npackage mirror  b\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if ex, err := parseExceptions(c.text); err == nil {
				t.Errorf("accepted: %q", ex)
			}
		})
	}
	ex, err := parseExceptions("# c\n\npackage mirror  #27: split\ntype mirror.Engine  #27\n")
	if err != nil || len(ex) != 2 || ex["package mirror"] != "#27: split" || ex["type mirror.Engine"] != "#27" {
		t.Errorf("got %q, %v", ex, err)
	}
}
