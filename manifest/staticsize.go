package manifest

// The bounds of a static evaluation (static.go): the configuration is a
// stranger's (a CI checkout), and a few lines of locals that double a
// string at each step, or call setproduct on ranges, make a value of
// gigabytes before a module's source is read.

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"

	"github.com/tfmirror/tfmirror/v2/internal/hclfile"
)

// maxStaticSize bounds, in staticSize's units, each value a static
// evaluation makes (a variable, a local, a module's source or version),
// what one expression refers to, and what the function calls of one
// expression return together: as large as a configuration file may be.
const maxStaticSize = hclfile.MaxBytes

// staticElementSize is what one element of a collection, or a number or
// a bool, counts for in staticSize: about what cty holds it in.
const staticElementSize = 256

// staticBudget is what the function calls of the expression being
// evaluated have returned so far, in staticSize's units.
type staticBudget struct{ used int }

// staticSize is the size of v, its strings' bytes and staticElementSize
// for each other value, counted up to past limit only.
func staticSize(v cty.Value, limit int) int {
	if v.IsNull() || !v.IsKnown() {
		return staticElementSize
	}
	ty := v.Type()
	switch {
	case ty == cty.String:
		return len(v.AsString())
	case ty == cty.Number:
		// Beyond 10^±308 a number takes minutes to turn into text.
		if exp := v.AsBigFloat().MantExp(nil); exp > hclfile.MaxNumberExp || exp < -hclfile.MaxNumberExp {
			return limit + 1
		}
		return staticElementSize
	case ty.IsPrimitiveType():
		return staticElementSize
	case ty.IsListType() || ty.IsSetType() || ty.IsTupleType() || ty.IsMapType() || ty.IsObjectType():
		n := staticElementSize
		for it := v.ElementIterator(); it.Next() && n <= limit; {
			k, e := it.Element()
			if ty.IsMapType() || ty.IsObjectType() {
				n += staticSize(k, limit-n)
			}
			n += staticSize(e, limit-n)
		}
		return n
	}
	return staticElementSize
}

// tooLarge is the error for a value of what (at rng) past maxStaticSize.
func tooLarge(rng hcl.Range, what string) error {
	return posError(rng, "%s: larger than %d bytes (or %d elements), the most a module's source and version are evaluated from", what, maxStaticSize, maxStaticSize/staticElementSize)
}

// checkReferences refuses expr when the values it refers to (vars and
// locals, each as many times as it is referred to) are together larger
// than maxStaticSize: a template repeating a large local is refused
// before it is made.
func checkReferences(expr hcl.Expression, vars, locals map[string]cty.Value) error {
	total := 0
	for _, t := range expr.Variables() {
		if len(t) < 2 {
			continue
		}
		ta, ok := t[1].(hcl.TraverseAttr)
		if !ok {
			continue
		}
		var v cty.Value
		switch t.RootName() {
		case "var":
			v = vars[ta.Name]
		case "local":
			v = locals[ta.Name]
		default:
			continue
		}
		if v == cty.NilVal {
			continue
		}
		if total += staticSize(v, maxStaticSize-total); total > maxStaticSize {
			return tooLarge(expr.Range(), "what it refers to")
		}
	}
	return nil
}

// boundedFunctions is fs, each function (but try and can, which
// evaluate expressions, not values) counting what it returns in b and
// failing past maxStaticSize, and those that may return much more than
// they are given (setproduct, join, replace, indent, format, formatlist,
// split, regexall) refusing, before they run, arguments that would make
// more.
func boundedFunctions(fs map[string]function.Function, b *staticBudget) map[string]function.Function {
	out := make(map[string]function.Function, len(fs)+1)
	fs[meterName] = meterFunction
	for name, f := range fs {
		if name == "try" || name == "can" {
			out[name] = f
			continue
		}
		out[name] = function.New(&function.Spec{
			Params:   f.Params(),
			VarParam: f.VarParam(),
			Type:     func(args []cty.Value) (cty.Type, error) { return f.ReturnTypeForValues(args) },
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				if n := mayMake(name, args); n > maxStaticSize-b.used {
					return cty.NilVal, fmt.Errorf("would return more than %d bytes (or %d elements)", maxStaticSize, maxStaticSize/staticElementSize)
				}
				v, err := f.Call(args)
				if err != nil {
					return v, err
				}
				if b.used += staticSize(v, maxStaticSize-b.used); b.used > maxStaticSize {
					return cty.NilVal, fmt.Errorf("the function calls and for expressions of the expression made more than %d bytes (or %d elements)", maxStaticSize, maxStaticSize/staticElementSize)
				}
				return v, nil
			},
		})
	}
	return out
}

// mayMake is at least what the function name may return of args, when
// it may return much more than it is given; 0 for the others.
func mayMake(name string, args []cty.Value) int {
	known := func(v cty.Value) bool { return !v.IsNull() && v.IsWhollyKnown() }
	str := func(v cty.Value) int {
		if known(v) && v.Type() == cty.String {
			return len(v.AsString())
		}
		return 0
	}
	length := func(v cty.Value) int {
		if known(v) && v.CanIterateElements() {
			return v.LengthInt()
		}
		return 0
	}
	sat := func(a, b int) int { // a*b, held at maxStaticSize+1
		if a != 0 && b > (maxStaticSize+1)/a {
			return maxStaticSize + 1
		}
		return a * b
	}
	switch name {
	case "setproduct":
		n := 1
		for _, a := range args {
			n = sat(n, length(a))
		}
		return sat(n, staticElementSize*(len(args)+1))
	case "join":
		if len(args) > 1 {
			n := 0
			for _, a := range args[1:] {
				n += length(a)
			}
			return sat(str(args[0]), n)
		}
	case "replace":
		if len(args) == 3 {
			s, sub, repl := str(args[0]), stringOr(args[1]), str(args[2])
			matches := s + 1 // a regular expression's, or an empty substring's
			if len(sub) > 0 && !(len(sub) > 1 && sub[0] == '/' && sub[len(sub)-1] == '/') {
				matches = s/len(sub) + 1
			} else {
				repl += sat(strings.Count(stringOr(args[2]), "$"), s) // each $1 up to s
			}
			return s + sat(matches, repl)
		}
	case "indent":
		if len(args) == 2 && known(args[0]) && args[0].Type() == cty.Number {
			spaces, _ := args[0].AsBigFloat().Int64()
			if spaces < 0 || spaces > maxStaticSize {
				return maxStaticSize + 1
			}
			return sat(int(spaces), strings.Count(stringOr(args[1]), "\n")+1)
		}
	case "format", "formatlist":
		if len(args) > 0 {
			n := 1
			if name == "formatlist" {
				for _, a := range args[1:] {
					if known(a) && (a.Type().IsListType() || a.Type().IsTupleType()) {
						n = max(n, length(a))
					}
				}
			}
			return sat(n, widths(stringOr(args[0])))
		}
	case "split", "regexall":
		if len(args) == 2 {
			return sat(str(args[1])+1, staticElementSize)
		}
	}
	return 0
}

// stringOr is v's string, "" when v is no known string.
func stringOr(v cty.Value) string {
	if v.IsNull() || !v.IsWhollyKnown() || v.Type() != cty.String {
		return ""
	}
	return v.AsString()
}

// widths is the sum of the numbers written in the format string f (its
// verbs' widths and precisions, and the rest), held at maxStaticSize+1.
func widths(f string) int {
	total, n := 0, 0
	for i := 0; i <= len(f); i++ {
		if i < len(f) && f[i] >= '0' && f[i] <= '9' {
			if n = n*10 + int(f[i]-'0'); n > maxStaticSize {
				return maxStaticSize + 1
			}
			continue
		}
		if total += n; total > maxStaticSize {
			return maxStaticSize + 1
		}
		n = 0
	}
	return total
}

// meterName is the function metered wraps a for expression's parts in,
// named so that no configuration can call it (a space).
const meterName = "for expression"

// meterFunction is the identity, through which boundedFunctions counts
// each collection a for expression goes through and each key and
// element it makes.
var meterFunction = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "v", Type: cty.DynamicPseudoType, AllowNull: true, AllowDynamicType: true}},
	Type:   func(args []cty.Value) (cty.Type, error) { return args[0].Type(), nil },
	Impl:   func(args []cty.Value, _ cty.Type) (cty.Value, error) { return args[0], nil },
})

// metered makes each for expression of expr (of the native syntax; once)
// go through meterName for its collection, its keys and its elements:
// nested in one another, they make their elements one by one, each
// counted against the bound as it is made, not once millions are.
func metered(expr hcl.Expression) {
	node, ok := expr.(hclsyntax.Node)
	if !ok {
		return
	}
	wrap := func(e hclsyntax.Expression) hclsyntax.Expression {
		if e == nil {
			return nil
		}
		if call, ok := e.(*hclsyntax.FunctionCallExpr); ok && call.Name == meterName {
			return e
		}
		return &hclsyntax.FunctionCallExpr{Name: meterName, Args: []hclsyntax.Expression{e}, NameRange: e.Range(), OpenParenRange: e.Range(), CloseParenRange: e.Range()}
	}
	hclsyntax.VisitAll(node, func(n hclsyntax.Node) hcl.Diagnostics {
		if f, ok := n.(*hclsyntax.ForExpr); ok {
			f.CollExpr, f.KeyExpr, f.ValExpr = wrap(f.CollExpr), wrap(f.KeyExpr), wrap(f.ValExpr)
		}
		return nil
	})
}

// nativeOf is expr, or, for a JSON string that is a template, the
// template parsed as HCL's JSON reading parses it when it evaluates it
// (its position one byte on, past the quote): native, so that metered
// reaches its for expressions. A JSON array or object is expr itself.
func nativeOf(expr hcl.Expression) hcl.Expression {
	if _, native := expr.(hclsyntax.Expression); native {
		return expr
	}
	v, diags := expr.Value(nil) // a JSON string, read as text
	if diags.HasErrors() || v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		return expr
	}
	s := v.AsString()
	if !strings.Contains(s, "${") && !strings.Contains(s, "%{") {
		return expr
	}
	start := expr.Range().Start
	start.Byte++
	start.Column++
	t, diags := hclsyntax.ParseTemplate([]byte(s), expr.Range().Filename, start)
	if diags.HasErrors() {
		return expr // as JSON's reading refuses it
	}
	return t
}

// hugeLiteral refuses expr (of the native syntax) when it writes a
// number beyond 10^±308 (hclfile.MaxNumberExp), as hclfile.Value does,
// before it is evaluated: "${1e3000000}" took seconds to turn into
// text, and made a message of megabytes.
func hugeLiteral(expr hcl.Expression) error {
	node, ok := expr.(hclsyntax.Node)
	if !ok {
		return nil
	}
	var err error
	hclsyntax.VisitAll(node, func(n hclsyntax.Node) hcl.Diagnostics {
		if lit, ok := n.(*hclsyntax.LiteralValueExpr); ok && err == nil && lit.Val.Type() == cty.Number && !lit.Val.IsNull() {
			if exp := lit.Val.AsBigFloat().MantExp(nil); exp > hclfile.MaxNumberExp || exp < -hclfile.MaxNumberExp {
				err = posError(lit.SrcRange, "a number beyond 10^±308 is not evaluated (its binary exponent is %d)", exp)
			}
		}
		return nil
	})
	return err
}
