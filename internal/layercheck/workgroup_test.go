package layercheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// groupPackage is the one package whose production code starts an
// errgroup: internal/workgroup, whose groups turn a goroutine's panic
// into the group's error, and whose Guarded does so for a function run
// on a goroutine of its own.
const (
	groupPackage = "internal/workgroup"
	errgroupPath = "golang.org/x/sync/errgroup"
)

// TestGoroutinesGuarded holds every production package of the module but
// internal/workgroup (and the test rigs and programs of the tests layer)
// to starting the goroutines of a step through internal/workgroup, where a
// panic on one of them is the step's error, logged, and not the end of
// the process: no import of errgroup (workgroup.Group instead), no
// function handed to singleflight's DoChan, which runs it on a goroutine
// of its own, but one made by workgroup.Guarded; and, in the engine's
// packages (mirror and below it), whose goroutines run the work of
// requests, no go statement (workgroup.Go instead).
func TestGoroutinesGuarded(t *testing.T) {
	eachProductionFile(t, groupPackage, func(fset *token.FileSet, pkg string, f *ast.File) {
		engine := pkg == "mirror" || strings.HasPrefix(pkg, "mirror/")
		for _, msg := range unguarded(f, engine) {
			t.Errorf("%s: %s %s", fset.Position(msg.pos), pkg, msg.what)
		}
	})
}

type finding struct {
	pos  token.Pos
	what string
}

// unguarded returns f's imports of errgroup and its calls of a DoChan
// method whose function is not a call of workgroup.Guarded, and, for a
// file of the engine, its go statements.
func unguarded(f *ast.File, engine bool) []finding {
	var out []finding
	for _, imp := range f.Imports {
		if path, _ := strconv.Unquote(imp.Path.Value); path == errgroupPath {
			out = append(out, finding{imp.Pos(), "imports " + errgroupPath + ": start the goroutines through " + groupPackage + ", whose groups fail the step on a panic where an errgroup's ends the process"})
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if g, ok := n.(*ast.GoStmt); ok && engine {
			out = append(out, finding{g.Pos(), "starts a goroutine with a go statement: start it with workgroup.Go, where a panic ends the goroutine, logged, not the process"})
		}
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "DoChan" || len(call.Args) != 2 {
			return true
		}
		if !isGuardedCall(call.Args[1]) {
			out = append(out, finding{call.Pos(), "hands DoChan a function not made by workgroup.Guarded: a panic of it, on DoChan's own goroutine, ends the process"})
		}
		return true
	})
	return out
}

// isGuardedCall says e is a call of workgroup.Guarded.
func isGuardedCall(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	fun := call.Fun
	if ix, ok := fun.(*ast.IndexExpr); ok { // workgroup.Guarded[T](...)
		fun = ix.X
	}
	sel, ok := fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "workgroup" && sel.Sel.Name == "Guarded"
}

// The check finds an errgroup imported, a DoChan handed a bare function
// and, in the engine, a go statement; it passes a DoChan handed
// workgroup.Guarded's, and a go statement outside the engine.
func TestUnguardedFound(t *testing.T) {
	const src = `package p

import (
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"
	"example.com/internal/workgroup"
)

var _ errgroup.Group

func f(g *singleflight.Group) {
	g.DoChan("bare", func() (any, error) { return nil, nil })
	g.DoChan("guarded", workgroup.Guarded(nil, func() (any, error) { return nil, nil }))
	g.DoChan("instantiated", workgroup.Guarded[any](nil, func() (any, error) { return nil, nil }))
	go f(g)
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		engine bool
		want   []int
	}{{false, []int{4, 12}}, {true, []int{4, 12, 15}}} {
		var lines []int
		for _, m := range unguarded(f, c.engine) {
			lines = append(lines, fset.Position(m.pos).Line)
		}
		slices.Sort(lines)
		if !slices.Equal(lines, c.want) {
			t.Errorf("engine %v: findings on lines %v, want %v", c.engine, lines, c.want)
		}
	}
}
