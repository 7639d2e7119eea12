package hclfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// TestValueOfHugeNumbersBounded: a number literal of a huge magnitude is a
// few bytes of a file, but printing it takes time quadratic in its
// digits: a template that interpolates it ("${1e30000000}", thirty million
// digits) took more than ten minutes to evaluate, in any file read here:
// the configuration file (a reload, and every reload after it, held),
// pins, and the .tf files of the modules sync fetches, which strangers
// write. So could arithmetic on numbers within the bound, and a for
// expression makes a value of any size from a few bytes. Value refuses
// them at once, naming the file and line, and a JSON number beyond the
// bound too.
func TestValueOfHugeNumbersBounded(t *testing.T) {
	for _, tc := range []struct{ name, file, body string }{
		{"native template", "a.tf", "module \"m\" {\n  source = \"./${1e30000000}\"\n}\n"},
		{"native heredoc", "a.hcl", "a = <<EOT\n${1e30000000}\nEOT\n"},
		{"tiny number", "a.hcl", "a = \"${1e-30000000}\"\n"},
		{"arithmetic", "a.hcl", "a = \"${1e300*1e300*1e300*1e300*1e300*1e300*1e300*1e300}\"\n"},
		{"for", "a.hcl", "a = [for x in [1,2,3,4] : [for y in [1,2,3,4] : x*y]]\n"},
		{"json number", "a.json", `{"a": 1e30000000}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.file)
			if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			done := make(chan hcl.Diagnostics, 1)
			go func() {
				f, diags, err := Parse(nil, path)
				if err != nil || diags.HasErrors() || f == nil {
					done <- diags
					return
				}
				done <- evalAll(f.Body)
			}()
			select {
			case diags := <-done:
				if !diags.HasErrors() || !strings.Contains(diags.Error(), filepath.Base(path)+":") {
					t.Errorf("%s: %v, want refused with its file:line", tc.body, diags)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: still reading and evaluating after 5s", tc.body)
			}
		})
	}
}

// evalAll evaluates every attribute of body and of its module blocks
// through Value, as the files' readers do, and returns the errors.
func evalAll(body hcl.Body) hcl.Diagnostics {
	c, _, _ := body.PartialContent(&hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "a"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "module", LabelNames: []string{"name"}}},
	})
	var diags hcl.Diagnostics
	for _, a := range c.Attributes {
		_, ds := Value(a.Expr)
		diags = append(diags, ds...)
	}
	for _, b := range c.Blocks {
		attrs, _ := b.Body.JustAttributes()
		for _, a := range attrs {
			_, ds := Value(a.Expr)
			diags = append(diags, ds...)
		}
	}
	return diags
}

// Literal values, as every file here holds them, read as before: strings,
// templates of literals, numbers (negative, fractional, up to 10^308),
// booleans, null, lists and objects.
func TestValueOfLiterals(t *testing.T) {
	for src, want := range map[string]cty.Value{
		`"1.2.3"`:              cty.StringVal("1.2.3"),
		`"./${"mod"}/x"`:       cty.StringVal("./mod/x"),
		`-12`:                  cty.NumberIntVal(-12),
		`0.5`:                  cty.NumberFloatVal(0.5),
		`1e308`:                cty.MustParseNumberVal("1e308"),
		`true`:                 cty.True,
		`null`:                 cty.NullVal(cty.DynamicPseudoType),
		`["a", 1]`:             cty.TupleVal([]cty.Value{cty.StringVal("a"), cty.NumberIntVal(1)}),
		`{ a = "x", "b" = 2 }`: cty.ObjectVal(map[string]cty.Value{"a": cty.StringVal("x"), "b": cty.NumberIntVal(2)}),
		`(!false)`:             cty.True,
	} {
		path := filepath.Join(t.TempDir(), "v.hcl")
		if err := os.WriteFile(path, []byte("v = "+src+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		f, diags, err := Parse(nil, path)
		if err != nil || diags.HasErrors() {
			t.Fatalf("%s: %v %v", src, err, diags)
		}
		attrs, _ := f.Body.JustAttributes()
		got, diags := Value(attrs["v"].Expr)
		if diags.HasErrors() || !got.RawEquals(want) {
			t.Errorf("Value(%s) = %#v, %v; want %#v", src, got, diags, want)
		}
	}
}

// TestValueOfLongArithmeticRefusedAtOnce: a chain of binary operators
// nests without a bracket (1+1+...+1 is a tree as deep as it is long),
// so the depth bound lets one of a quarter of a million operators
// through, a module's main.tf of half a MiB. Refusing each of its
// operators, the visit of the tree took time quadratic in its length
// (the refusals of every level copied into the one above it): some
// minutes of sync on one module version's attribute, past its
// --module-timeout, which is checked between files. Value refuses it
// at its top, once, with its file and line, and visits nothing below
// it: the refusals counted show it on a chain of a few thousand.
func TestValueOfLongArithmeticRefusedAtOnce(t *testing.T) {
	chain := strings.Repeat("1+", 4000) + "1"
	for _, tc := range []struct{ name, body string }{
		{"attribute", "module \"m\" {\n  source  = \"x/y/z\"\n  version = " + chain + "\n}\n"},
		{"template", "a = \"${" + chain + "}\"\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "main.tf")
			if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			f, diags, err := Parse(nil, path)
			if err != nil || diags.HasErrors() || f == nil {
				t.Fatalf("the file is within the bounds of a file, yet: %v %v", err, diags)
			}
			if diags := evalAll(f.Body); len(diags) != 1 || !strings.Contains(diags.Error(), "main.tf:") {
				t.Errorf("%d diagnostics (%.200v), want the expression refused once with its file:line", len(diags), diags)
			}
		})
	}
}
