package layercheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// openpgpReaders are the functions of go-crypto that parse OpenPGP
// packets from bytes, keys and signatures: their parsing and the
// verifications it runs cost what the keys' sizes make them, which
// package verify bounds (verify.ReadKeys, verify.VerifyDetached). By
// import path, then function name.
var openpgpReaders = map[string][]string{
	"github.com/ProtonMail/go-crypto/openpgp": {
		"ReadArmoredKeyRing", "ReadKeyRing", "ReadEntity", "ReadMessage",
		"VerifyDetachedSignature", "VerifyArmoredDetachedSignature",
		"CheckDetachedSignature", "CheckArmoredDetachedSignature",
		"CheckDetachedSignatureAndHash",
	},
	"github.com/ProtonMail/go-crypto/openpgp/packet": {"Read", "NewReader", "ReadWithCheck"},
}

// keysPackage is the one package whose production code calls them.
const keysPackage = "verify"

// TestOpenPGPReadThroughVerify holds every production package of the
// module but verify (and the test rigs of the tests layer) to reading
// OpenPGP keys and signatures through package verify, whose readers
// weigh them before go-crypto verifies anything: a call of one of
// go-crypto's readers elsewhere is a reading the bounds do not cover.
func TestOpenPGPReadThroughVerify(t *testing.T) {
	eachProductionFile(t, keysPackage, func(fset *token.FileSet, pkg string, f *ast.File) {
		for _, call := range openpgpCalls(f) {
			t.Errorf("%s: %s calls go-crypto's %s: read OpenPGP keys and signatures through package verify (verify.ReadKeys, verify.VerifyDetached), which bounds what they cost",
				fset.Position(call.Pos()), pkg, call.Sel.Name)
		}
	})
}

// eachProductionFile calls fn with each production file of the module's
// packages, parsed, but those of the tests layer (test rigs and
// programs) and of the package except; it fails t when it finds fewer
// files than the module has.
func eachProductionFile(t *testing.T, except string, fn func(fset *token.FileSet, pkg string, f *ast.File)) {
	t.Helper()
	tb := readLayers(t)
	tests := slices.Index(tb.layers, testsLayer)
	checked := 0
	for pkg, layer := range tb.layerOf {
		if layer == tests || pkg == except {
			continue
		}
		fset := token.NewFileSet()
		files, err := parseDir(fset, filepath.Join(root, pkg), false)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			checked++
			fn(fset, pkg, f)
		}
	}
	if checked < 100 {
		t.Fatalf("%d files checked: not the module's packages", checked)
	}
}

// openpgpCalls returns the selectors of f that name one of
// openpgpReaders through f's imports.
func openpgpCalls(f *ast.File) []*ast.SelectorExpr {
	names := map[string][]string{} // local name -> functions
	for _, spec := range f.Imports {
		path, _ := strconv.Unquote(spec.Path.Value)
		fns, ok := openpgpReaders[path]
		if !ok {
			continue
		}
		name := filepath.Base(path)
		if spec.Name != nil {
			name = spec.Name.Name
		}
		names[name] = fns
	}
	var out []*ast.SelectorExpr
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && slices.Contains(names[x.Name], sel.Sel.Name) {
			out = append(out, sel)
		}
		return true
	})
	return out
}

// TestOpenPGPCallsFound: the check finds a call through the package's
// own name and through another, and nothing in a file that does not
// import go-crypto's readers.
func TestOpenPGPCallsFound(t *testing.T) {
	for _, c := range []struct {
		src  string
		want int
	}{
		{`package p; import "github.com/ProtonMail/go-crypto/openpgp"; var _, _ = openpgp.ReadArmoredKeyRing(nil)`, 1},
		{`package p; import pgp "github.com/ProtonMail/go-crypto/openpgp"; var _, _ = pgp.ReadKeyRing(nil)`, 1},
		{`package p; import "github.com/ProtonMail/go-crypto/openpgp/packet"; var _ = packet.NewReader(nil)`, 1},
		{`package p; import "github.com/ProtonMail/go-crypto/openpgp"; var _ = openpgp.NewEntity`, 0},
		{`package p; import "other/openpgp"; var _, _ = openpgp.ReadKeyRing(nil)`, 0},
	} {
		f, err := parser.ParseFile(token.NewFileSet(), "p.go", c.src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(openpgpCalls(f)); got != c.want {
			t.Errorf("%s: %d calls found, want %d", c.src, got, c.want)
		}
	}
}
