package layercheck

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// The marks: a figure above its mark is not a failure to cut away, but a
// question for a reviewer. It needs a note in ARCHITECTURE.md's "Size
// review notes" table saying why it stands (TestSizes), and the note goes
// when the figure is under its mark again.
const (
	// methodMark bounds a production type's method set: the methods of
	// *T as go/types sees them, promoted ones from embedded fields
	// included (embedding is no split), plus the functions whose first
	// parameter is T or *T (nor is turning a method into such a function).
	methodMark = 30
	// lineMark bounds a production package's lines, tests not counted.
	lineMark = 3500
	// familyMark bounds the engine and every type that holds it: the
	// method sets of mirror.Engine and of each production struct type
	// with a field of type *mirror.Engine or mirror.Engine. A type that
	// holds the engine can reach all of it, so its methods are the
	// engine's surface too.
	familyMark = 60
)

// engineType is the type whose family familyMark bounds.
const engineType = "mirror.Engine"

// typeSize is what counts against a type.
type typeSize struct {
	name             string // package.Type
	methods, asFirst int    // the method set of *T; functions taking T first
	holds            string // the family it belongs to, if it holds engineType
}

func (s typeSize) total() int { return s.methods + s.asFirst }

// pkgSize is a production package's size: the lines of its files but
// its tests, and its types.
type pkgSize struct {
	path         string
	files, lines int
	types        []typeSize
}

// measureTypes counts the method sets of the named non-interface types
// pkg declares (path is its path inside the repository), and marks those
// that hold a field of the engine type.
func measureTypes(path string, pkg *types.Package) []typeSize {
	scope := pkg.Scope()
	counts := map[string]*typeSize{}
	for _, name := range scope.Names() {
		tn, ok := scope.Lookup(name).(*types.TypeName)
		if !ok || tn.IsAlias() {
			continue
		}
		named, ok := tn.Type().(*types.Named)
		if !ok {
			continue
		}
		if _, iface := named.Underlying().(*types.Interface); iface {
			continue
		}
		ts := &typeSize{name: path + "." + name}
		ts.methods = types.NewMethodSet(types.NewPointer(named)).Len()
		if st, ok := named.Underlying().(*types.Struct); ok {
			for f := range st.Fields() {
				if holdsEngine(f.Type()) {
					ts.holds = engineType
				}
			}
		}
		counts[name] = ts
	}
	for _, name := range scope.Names() {
		fn, ok := scope.Lookup(name).(*types.Func)
		if !ok {
			continue
		}
		params := fn.Type().(*types.Signature).Params()
		if params.Len() == 0 {
			continue
		}
		first := params.At(0).Type()
		if p, ok := first.(*types.Pointer); ok {
			first = p.Elem()
		}
		if named, ok := first.(*types.Named); ok && named.Obj().Pkg() == pkg && counts[named.Obj().Name()] != nil {
			counts[named.Obj().Name()].asFirst++
		}
	}
	var out []typeSize
	for _, c := range counts {
		if c.total() > 0 || c.holds != "" {
			out = append(out, *c)
		}
	}
	slices.SortFunc(out, func(a, b typeSize) int {
		return cmp.Or(cmp.Compare(b.total(), a.total()), strings.Compare(a.name, b.name))
	})
	return out
}

// holdsEngine reports whether a field of type t holds the engine: t is
// the engine type or a pointer to it.
func holdsEngine(t types.Type) bool {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	named, ok := t.(*types.Named)
	if !ok || named.Obj().Pkg() == nil {
		return false
	}
	pkgPath, name, _ := strings.Cut(engineType, ".")
	return strings.HasSuffix(named.Obj().Pkg().Path(), "/"+pkgPath) && named.Obj().Name() == name
}

// family is the engine's figure: the engine's count and the counts of
// the types that hold it, by name.
func family(sizes []pkgSize) (total int, members []typeSize) {
	for _, ps := range sizes {
		for _, ts := range ps.types {
			if ts.name == engineType || ts.holds == engineType {
				members = append(members, ts)
				total += ts.total()
			}
		}
	}
	slices.SortFunc(members, func(a, b typeSize) int {
		return cmp.Or(cmp.Compare(b.total(), a.total()), strings.Compare(a.name, b.name))
	})
	return total, members
}

// countLines counts the lines of the production files of dir, for every
// platform.
func countLines(dir string) (files, lines int, err error) {
	names, err := goFiles(dir, false)
	if err != nil {
		return 0, 0, err
	}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return 0, 0, err
		}
		lines += bytes.Count(b, []byte("\n"))
		if len(b) > 0 && b[len(b)-1] != '\n' {
			lines++
		}
	}
	return len(names), lines, nil
}

// overMark returns what is above its mark, keyed as the review notes
// name it ("package PATH", "type PACKAGE.TYPE", "family mirror.Engine"),
// with the figure.
func overMark(sizes []pkgSize) map[string]string {
	over := map[string]string{}
	for _, ps := range sizes {
		if ps.lines > lineMark {
			over["package "+ps.path] = fmt.Sprintf("%d lines, above the mark of %d", ps.lines, lineMark)
		}
		for _, ts := range ps.types {
			if ts.total() > methodMark {
				over["type "+ts.name] = fmt.Sprintf("%d methods in its method set (%d of them functions taking it first), above the mark of %d", ts.total(), ts.asFirst, methodMark)
			}
		}
	}
	if total, members := family(sizes); total > familyMark {
		over["family "+engineType] = fmt.Sprintf("%d methods in %s and the %d types that hold it, above the mark of %d", total, engineType, len(members)-1, familyMark)
	}
	return over
}

// reviewNotes reads the "Size review notes" section of ARCHITECTURE.md:
// a table whose rows are "| KIND NAME | figure | why |", KIND one of
// package, type, family.
func reviewNotes(doc string) (map[string]string, error) {
	_, section, ok := strings.Cut(doc, "\n## Size review notes\n")
	if !ok {
		return nil, fmt.Errorf(`ARCHITECTURE.md has no "## Size review notes" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	notes := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(section))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		kind, _, _ := strings.Cut(cells[0], " ")
		switch kind {
		case "package", "type", "family":
		default:
			continue // the header and its rule
		}
		if len(cells) < 3 || cells[len(cells)-1] == "" {
			return nil, fmt.Errorf("review note %q: want | KIND NAME | figure | why |, with a reason", line)
		}
		if _, dup := notes[cells[0]]; dup {
			return nil, fmt.Errorf("review note for %s twice", cells[0])
		}
		notes[cells[0]] = cells[len(cells)-1]
	}
	return notes, sc.Err()
}

// report is the sizes as a text table: every production package, the
// types with at least minShown methods, and the engine's family.
func report(sizes []pkgSize, over map[string]string) string {
	const minShown = 15
	var b strings.Builder
	mark := func(key string) string {
		if over[key] != "" {
			return "  over the mark"
		}
		return ""
	}
	sizes = slices.Clone(sizes)
	slices.SortFunc(sizes, func(a, b pkgSize) int { return cmp.Or(cmp.Compare(b.lines, a.lines), strings.Compare(a.path, b.path)) })
	total := 0
	fmt.Fprintf(&b, "lines per production package (mark %d; tests not counted):\n", lineMark)
	fmt.Fprintf(&b, "  %-28s %6s %6s\n", "package", "lines", "files")
	for _, ps := range sizes {
		total += ps.lines
		fmt.Fprintf(&b, "  %-28s %6d %6d%s\n", ps.path, ps.lines, ps.files, mark("package "+ps.path))
	}
	fmt.Fprintf(&b, "  %-28s %6d\n", "all", total)
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
	fmt.Fprintf(&b, "method sets of production types, those of %d or more (mark %d; promoted methods and functions taking the type first count):\n", minShown, methodMark)
	fmt.Fprintf(&b, "  %-36s %6s %8s %10s\n", "type", "count", "methods", "functions")
	for _, ts := range types {
		fmt.Fprintf(&b, "  %-36s %6d %8d %10d%s\n", ts.name, ts.total(), ts.methods, ts.asFirst, mark("type "+ts.name))
	}
	fam, members := family(sizes)
	fmt.Fprintf(&b, "the engine and the types that hold it (mark %d): %d%s\n", familyMark, fam, mark("family "+engineType))
	for _, ts := range members {
		fmt.Fprintf(&b, "  %-36s %6d\n", ts.name, ts.total())
	}
	return b.String()
}

// loadSizes measures the production packages the layer table lists
// (every layer but the tests): lines from their files, method sets from
// go/types.
func loadSizes(t *testing.T, tb *table) []pkgSize {
	t.Helper()
	var paths []string
	for path, layer := range tb.layerOf {
		if tb.layers[layer] != testsLayer {
			paths = append(paths, path)
		}
	}
	slices.Sort(paths)
	patterns := make([]string, len(paths))
	for i, p := range paths {
		patterns[i] = "./" + p
	}
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes | packages.NeedSyntax, Dir: root}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		t.Fatalf("loading the production packages: %v", err)
	}
	mod := modulePath(t)
	byPath := map[string]*packages.Package{}
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Errorf("%s: %v", p.PkgPath, e)
		}
		byPath[strings.TrimPrefix(p.PkgPath, mod+"/")] = p
	}
	var sizes []pkgSize
	for _, path := range paths {
		p := byPath[path]
		if p == nil || p.Types == nil {
			t.Errorf("%s: not loaded", path)
			continue
		}
		ps := pkgSize{path: path, types: measureTypes(path, p.Types)}
		ps.files, ps.lines, err = countLines(filepath.Join(root, filepath.FromSlash(path)))
		if err != nil {
			t.Fatal(err)
		}
		if ps.files == 0 {
			t.Errorf("%s: no production files (is it in the right layer of layers.txt?)", path)
		}
		sizes = append(sizes, ps)
	}
	return sizes
}

// modulePath is the module's path, from go.mod.
func modulePath(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "module "); ok {
			if p, err := strconv.Unquote(strings.TrimSpace(rest)); err == nil {
				return p
			}
			return strings.TrimSpace(rest)
		}
	}
	t.Fatal("go.mod names no module")
	return ""
}

// TestSizes measures every production package (every package of the
// layer table but the tests layer) and fails on a figure above its mark
// that ARCHITECTURE.md's "Size review notes" do not explain, and on a
// note for a figure that is no longer above its mark. With -v it prints
// the report.
func TestSizes(t *testing.T) {
	tb := readLayers(t)
	sizes := loadSizes(t, tb)
	if len(sizes) < 20 {
		t.Fatalf("measured %d production packages", len(sizes))
	}
	over := overMark(sizes)
	t.Logf("\n%s", report(sizes, over))
	doc, err := os.ReadFile(filepath.Join(root, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	notes, err := reviewNotes(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	for key, figure := range over {
		if _, ok := notes[key]; !ok {
			t.Errorf("%s: %s. Review it: make it smaller, or add a row to ARCHITECTURE.md's \"Size review notes\" saying why it stands", key, figure)
		}
	}
	for key := range notes {
		if _, ok := over[key]; !ok {
			t.Errorf("ARCHITECTURE.md's \"Size review notes\" explain %s, which is no longer above its mark: delete the row", key)
		}
	}
}

// check type-checks one package from source for the tests below; it may
// import only the standard library.
func check(t *testing.T, src string) *types.Package {
	t.Helper()
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "p.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	conf := types.Config{Importer: importer.Default()}
	pkg, err := conf.Check("example.com/m/x/p", fset, []*ast.File{file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pkg
}

// TestMeasureCounts measures a package built for it: methods on the type
// and its pointer, promoted methods of embedded fields, generic receivers
// and functions taking the type first count; functions taking it second
// do not, nor do interfaces. Above the mark, the type and the package are
// reported.
func TestMeasureCounts(t *testing.T) {
	var src strings.Builder
	src.WriteString(`package p

import "strings"

type T struct{ E }
type E struct{}
type G[K comparable] struct{}
type I interface{ A(); B() }
type W struct{ *strings.Builder }

func (E) e1()                 {}
func (*E) e2()                {}
func (T) a()                  {}
func (*T) b()                 {}
func f(t *T, n int)           {}
func g(v T)                   {}
func h(n int, t *T)           {}
func k(o strings.Builder)     {}
func (g *G[K]) m()            {}
func (g G[K]) n()             {}
func NewT() *T                { return nil }
`)
	for i := range methodMark - 5 {
		fmt.Fprintf(&src, "func (*T) x%d() {}\n", i)
	}
	pkg := check(t, src.String())
	got := map[string]typeSize{}
	for _, ts := range measureTypes("x/p", pkg) {
		got[ts.name] = ts
	}
	want := map[string]typeSize{
		"x/p.T": {name: "x/p.T", methods: methodMark - 1, asFirst: 2}, // 25 x, a, b, e1, e2 promoted; f and g
		"x/p.E": {name: "x/p.E", methods: 2},
		"x/p.G": {name: "x/p.G", methods: 2},
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %+v, want %+v", name, got[name], w)
		}
	}
	if _, ok := got["x/p.I"]; ok {
		t.Errorf("the interface I was counted: %+v", got["x/p.I"])
	}
	if w := got["x/p.W"]; w.methods < 10 {
		t.Errorf("W embeds *strings.Builder, whose methods are promoted: counted %d", w.methods)
	}
	ps := pkgSize{path: "x/p", lines: lineMark + 1, types: []typeSize{got["x/p.T"]}}
	over := overMark([]pkgSize{ps})
	if len(over) != 2 || !strings.Contains(over["type x/p.T"], "31 methods in its method set (2 of them functions") || over["package x/p"] == "" {
		t.Errorf("overMark: %q, want type x/p.T and package x/p", over)
	}
	ps.lines = lineMark
	ps.types[0].asFirst = 1
	if over := overMark([]pkgSize{ps}); len(over) != 0 {
		t.Errorf("at the marks, overMark says %q", over)
	}
}

// TestFamilyCounts: the engine's figure is the engine's method set plus
// those of the struct types holding it, by pointer or by value.
func TestFamilyCounts(t *testing.T) {
	sizes := []pkgSize{
		{path: "mirror", types: []typeSize{{name: "mirror.Engine", methods: 20}, {name: "mirror.fetcher", methods: 15, holds: engineType}, {name: "mirror.other", methods: 40}}},
		{path: "mirror/part", types: []typeSize{{name: "mirror/part.adapter", methods: 20, asFirst: 6, holds: engineType}}},
	}
	total, members := family(sizes)
	if total != 61 || len(members) != 3 {
		t.Fatalf("family: %d in %d types, want 61 in 3", total, len(members))
	}
	over := overMark(sizes)
	if !strings.Contains(over["family "+engineType], "61 methods in mirror.Engine and the 2 types that hold it") {
		t.Errorf("overMark: %q", over)
	}
	pkg := check(t, `package p
type Engine struct{}
func (*Engine) A() {}
`)
	if holdsEngine(pkg.Scope().Lookup("Engine").Type()) {
		t.Error("a type named Engine outside a package named mirror is not the engine")
	}
}

// TestReviewNotes reads the notes table and refuses rows it could misread.
func TestReviewNotes(t *testing.T) {
	doc := "# A\n\n## Size review notes\n\n| figure | measured | why |\n| --- | --- | --- |\n" +
		"| type cache.Store | 43 | one Badger handle |\n| family mirror.Engine | 134 | being layered |\n\n## Next\n| type x.Y | 1 | not read |\n"
	notes, err := reviewNotes(doc)
	if err != nil || len(notes) != 2 || notes["type cache.Store"] != "one Badger handle" || notes["family mirror.Engine"] != "being layered" {
		t.Errorf("got %q, %v", notes, err)
	}
	for _, bad := range []string{
		"## Size review notes\n| type a.B | 40 | |\n",
		"## Size review notes\n| type a.B | 40 | x |\n| type a.B | 41 | y |\n",
		"no section\n",
	} {
		if notes, err := reviewNotes("\n" + bad); err == nil {
			t.Errorf("accepted %q: %q", bad, notes)
		}
	}
}
