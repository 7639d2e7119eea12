package hclfile

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// MaxNumberExp bounds the binary exponent of a number literal Value
// evaluates, either way (about 10^±308, float64's range): evaluating
// turns a number into text wherever a string is made of it (a template's
// interpolation, a conversion), in time that grows with the square of its
// digits, and "${1e30000000}", fourteen bytes of a file, took more than
// ten minutes.
const MaxNumberExp = 1024

// Value is the value of expr, an attribute's expression of a file Parse
// read, evaluated as every reader here evaluates one: without variables
// or functions. Only literal values are read: literal strings, numbers
// within MaxNumberExp, booleans and null, templates of them, tuples and
// objects of them, and the unary operators; arithmetic, conditionals,
// indexing, for and splat expressions are refused, with the expression's
// range, before anything is evaluated (none is needed to write a
// configuration, a pin or a module's source and version, which Terraform
// itself requires to be literal; each could make a value of a size no
// bound of the file limits). An expression of HCL's JSON syntax holds
// literal values only, whose numbers are held to MaxNumberExp once read.
func Value(expr hcl.Expression) (cty.Value, hcl.Diagnostics) {
	if n, ok := expr.(hclsyntax.Node); ok {
		// Every number of a literal was checked before it was evaluated.
		if diags := literalOnly(n); diags.HasErrors() {
			return cty.DynamicVal, diags
		}
		return expr.Value(nil)
	}
	v, diags := expr.Value(nil)
	if diags.HasErrors() {
		return v, diags
	}
	// A JSON number is a literal of any magnitude: checked once read.
	var huge hcl.Diagnostics
	cty.Walk(v, func(_ cty.Path, v cty.Value) (bool, error) { //nolint:errcheck // never fails
		if d := hugeNumber(v); d != "" && huge == nil {
			huge = refused(expr.Range(), d)
		}
		return huge == nil, nil
	})
	if huge != nil {
		return cty.DynamicVal, huge
	}
	return v, diags
}

// hugeNumber says why v, a number beyond MaxNumberExp, is not read; ""
// for any other value.
func hugeNumber(v cty.Value) string {
	if v.Type() != cty.Number || v.IsNull() || !v.IsKnown() {
		return ""
	}
	if exp := v.AsBigFloat().MantExp(nil); exp > MaxNumberExp || exp < -MaxNumberExp {
		return fmt.Sprintf("a number beyond 10^±308 is not read (its binary exponent is %d)", exp)
	}
	return ""
}

// literalOnly refuses n unless it is a literal value, naming the first
// node that is not part of one, and visits no node below it: a chain of
// binary operators nests without a bracket (1+1+...+1 is a tree as deep
// as it is long, which the depth bound lets through), and a visit of
// all of it, each operator refused, took time quadratic in its length.
// The nodes it descends through nest only by brackets, templates and
// unary operators, which the depth bound holds to MaxDepth.
func literalOnly(n hclsyntax.Node) hcl.Diagnostics {
	var below []hclsyntax.Expression
	switch n := n.(type) {
	case *hclsyntax.LiteralValueExpr:
		if d := hugeNumber(n.Val); d != "" {
			return refused(n.Range(), d)
		}
	case *hclsyntax.ScopeTraversalExpr:
	case *hclsyntax.TemplateExpr:
		below = n.Parts
	case *hclsyntax.TemplateWrapExpr:
		below = []hclsyntax.Expression{n.Wrapped}
	case *hclsyntax.TemplateJoinExpr:
		below = []hclsyntax.Expression{n.Tuple}
	case *hclsyntax.TupleConsExpr:
		below = n.Exprs
	case *hclsyntax.ObjectConsExpr:
		for _, item := range n.Items {
			below = append(below, item.KeyExpr, item.ValueExpr)
		}
	case *hclsyntax.ObjectConsKeyExpr:
		below = []hclsyntax.Expression{n.Wrapped}
	case *hclsyntax.ParenthesesExpr:
		below = []hclsyntax.Expression{n.Expression}
	case *hclsyntax.UnaryOpExpr:
		below = []hclsyntax.Expression{n.Val}
	case hclsyntax.Expression:
		return refused(n.Range(), "only literal values are read here: no arithmetic, conditional, index, for or splat expression")
	}
	for _, e := range below {
		if diags := literalOnly(e); diags.HasErrors() {
			return diags
		}
	}
	return nil
}

func refused(r hcl.Range, detail string) hcl.Diagnostics {
	return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Expression not read", Detail: detail, Subject: r.Ptr()}}
}
