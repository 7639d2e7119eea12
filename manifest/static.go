package manifest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/tfmirror/tfmirror/v2/internal/hclfile"
	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
)

// Input is one value given for a root module's variables, as `tofu init`
// takes -var NAME=VALUE (Name and Value) and -var-file FILE (File).
type Input struct {
	Name, Value string
	File        string
}

// maxStaticDepth bounds how many locals and variables one evaluation
// goes through, each referring to the next, and how deep local module
// calls nest once their arguments are evaluated: a module that calls
// itself with a value it changes (depth = var.depth + 1) is a new
// reading at each call.
const maxStaticDepth = 100

// staticScope is one module of the operator's configuration as OpenTofu
// evaluates it when it installs modules ("static evaluation"): a module
// block's source and version may refer to the module's variables and
// locals, path.module, path.root, path.cwd and terraform.workspace, and
// call functions that need no provider. A root module's variables take
// the values given as `tofu init` takes them (rootScope); a local
// module's, the arguments of the block that calls it, evaluated in its
// caller's scope (childScope); a variable given none, its default.
//
// It reads the module's variable and locals blocks when an expression
// first refers to one (one pass over its files), and evaluates each
// once. Only the operator's own configuration is evaluated: a module
// package fetched from a stranger is read as literals (a nil scope).
type staticScope struct {
	dir, root string   // the module's directory and the root module's, absolute
	files     []string // the module's configuration files
	// given are a root module's variables' values (isRoot: read
	// when first needed, from its directory and inputs); args a local
	// module's, by name, from the block calling it (caller, for
	// messages: `module "net"` at its file:line).
	isRoot bool
	inputs []Input
	given  map[string]givenValue
	args   map[string]argValue
	caller string
	// depth is how many local module calls lead to it from the root.
	depth int
	// funcs are the functions of the whole tree (functions), made once
	// with its root scope.
	funcs map[string]function.Function
	// budget is what the function calls of the expression being
	// evaluated returned (staticsize.go), shared as funcs is.
	budget *staticBudget

	read    bool
	loadErr error
	vars    map[string]*variableDecl
	locals  map[string]*hcl.Attribute
	values  map[string]cty.Value // "var.NAME", "local.NAME" evaluated
	pending map[string]bool      // those being evaluated: a cycle
}

// givenValue is a root module variable's value as given: a file's value
// (val), or a raw string (raw, from -var or TF_VAR_NAME) read as the
// variable's type asks; where says where it was given.
type givenValue struct {
	val   cty.Value
	raw   string
	isRaw bool
	where string
}

// argValue is a module block's argument evaluated in its caller's scope.
type argValue struct {
	val cty.Value
	err error
}

// variableDecl is a variable block: its type constraint (cty.NilType
// for none) and default.
type variableDecl struct {
	ty  cty.Type
	def *hcl.Attribute
	rng hcl.Range
}

// staticSchema is what static evaluation reads of a module's files.
var staticSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
	{Type: "variable", LabelNames: []string{"name"}},
	{Type: "locals"},
}}

var variableSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "type"}, {Name: "default"}}}

// moduleMetaArgs are a module block's arguments that are no variable's.
var moduleMetaArgs = map[string]bool{"source": true, "version": true, "count": true, "for_each": true, "providers": true, "depends_on": true}

// rootScope is the scope of the root module in dir, whose files are
// files: its variables take, the later replacing the earlier, the
// TF_VAR_NAME environment variables, terraform.tfvars,
// terraform.tfvars.json and the *.auto.tfvars(.json) files of dir in
// lexical order, then inputs in their order, as `tofu init` takes them.
func rootScope(dir string, files []string, inputs []Input) *staticScope {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs // as the local modules' directories are
	}
	budget := &staticBudget{}
	return &staticScope{dir: dir, root: dir, files: files, inputs: inputs, isRoot: true, funcs: boundedFunctions(functions(dir), budget), budget: budget}
}

// readGiven reads the values given for a root module's variables
// (rootScope).
func (sc *staticScope) readGiven() error {
	dir := sc.dir
	sc.given = map[string]givenValue{}
	for _, kv := range os.Environ() {
		if name, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(name, "TF_VAR_") && len(name) > len("TF_VAR_") {
			sc.given[name[len("TF_VAR_"):]] = givenValue{raw: v, isRaw: true, where: "environment variable " + name}
		}
	}
	var varFiles []string
	for _, name := range []string{"terraform.tfvars", "terraform.tfvars.json"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Mode().IsRegular() {
			varFiles = append(varFiles, filepath.Join(dir, name))
		}
	}
	auto, err := filesByExt(dir, ".auto.tfvars", ".auto.tfvars.json")
	if err != nil {
		return err
	}
	autoFiles := append(auto[".auto.tfvars"], auto[".auto.tfvars.json"]...)
	sort.Strings(autoFiles)
	for _, path := range append(varFiles, autoFiles...) {
		// The directory's own, read within it (inConfiguration); the
		// operator's --var-file, wherever it is.
		if _, err := inConfiguration(dir, path); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := sc.readVarFile(path); err != nil {
			return err
		}
	}
	for _, in := range sc.inputs {
		if in.File != "" {
			if err := sc.readVarFile(in.File); err != nil {
				return err
			}
			continue
		}
		sc.given[in.Name] = givenValue{raw: in.Value, isRaw: true, where: "--var " + in.Name}
	}
	return nil
}

// readVarFile takes the values of a variables file (HCL, or JSON by its
// .json name), each a literal.
func (sc *staticScope) readVarFile(path string) error {
	f, err := parseFile(nil, path)
	if err != nil {
		return err
	}
	attrs, diags := f.Body.JustAttributes()
	if diags.HasErrors() {
		return diagError(diags)
	}
	for name, a := range attrs {
		v, diags := hclfile.Value(a.Expr)
		if diags.HasErrors() {
			return diagError(diags)
		}
		sc.given[name] = givenValue{val: v, where: where(a.Range)}
	}
	return nil
}

// childScope is the scope of the local module in dir (its files) that a
// module block of sc calls (what, at rng) with the arguments args, each
// evaluated now in sc; nil for a nil sc. key tells its reading apart
// from the module's read with other values: the arguments that have one,
// by name, in JSON.
func (sc *staticScope) childScope(ctx context.Context, what string, rng hcl.Range, dir string, args hcl.Attributes) (child *staticScope, key string) {
	if sc == nil {
		return nil, ""
	}
	child = &staticScope{dir: dir, root: sc.root, args: map[string]argValue{}, caller: fmt.Sprintf("%s at %s", what, where(rng)), depth: sc.depth + 1, funcs: sc.funcs, budget: sc.budget}
	names := make([]string, 0, len(args))
	for name := range args {
		if !moduleMetaArgs[name] {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		v, err := sc.value(ctx, args[name].Expr)
		child.args[name] = argValue{v, err}
		if err != nil {
			continue
		}
		js, err := ctyjson.Marshal(v, v.Type())
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "%s=%s\x00", name, js)
	}
	return child, b.String()
}

// stringOf is the string expr, the source or version (attr) of a module
// block (what), stands for: a literal, or with a scope what it evaluates
// to (value). Without one, any other expression is refused, saying what
// it refers to and what to do.
func (sc *staticScope) stringOf(ctx context.Context, expr hcl.Expression, attr, what string) (string, error) {
	v, err := sc.valueOf(ctx, expr, attr, what)
	if err != nil {
		return "", err
	}
	return stringValue(v, expr, attr, what)
}

// valueOf is the value of expr as stringOf reads it, before it is taken
// for a string: cty.NilVal for an expression it cannot evaluate (one
// that refers to anything, without a scope).
func (sc *staticScope) valueOf(ctx context.Context, expr hcl.Expression, attr, what string) (cty.Value, error) {
	v, diags := hclfile.Value(expr)
	switch {
	case !diags.HasErrors() && !sc.templated(expr, v):
	case sc == nil:
		v = cty.NilVal
	default:
		var err error
		if v, err = sc.value(ctx, expr); err != nil {
			return cty.NilVal, fmt.Errorf("%s: %s of %s: %w", where(expr.Range()), attr, what, err)
		}
	}
	return v, nil
}

// stringValue is v, expr's value (valueOf), as stringOf takes it.
func stringValue(v cty.Value, expr hcl.Expression, attr, what string) (string, error) {
	if attr == "version" && v != cty.NilVal && v.IsKnown() && !v.IsNull() && v.Type() == cty.Number {
		v, _ = convert.Convert(v, cty.String) // version = 1, as both clients take it
	}
	if v == cty.NilVal || v.IsNull() || !v.IsKnown() || !v.Type().Equals(cty.String) {
		return "", posError(expr.Range(), "%s of %s must be a string%s", attr, what, staticOnly(expr))
	}
	return v.AsString(), nil
}

// templated reports whether expr, whose value read as a literal is v,
// is a template sc evaluates: one that refers to anything, or a JSON
// string with a template sequence (JSON reads "${...}" as text when
// given nothing to evaluate it with).
func (sc *staticScope) templated(expr hcl.Expression, v cty.Value) bool {
	if sc == nil {
		return false
	}
	if len(expr.Variables()) > 0 {
		return true
	}
	_, native := expr.(hclsyntax.Expression)
	return !native && v.Type() == cty.String && v.IsKnown() && !v.IsNull() && strings.Contains(v.AsString(), "${")
}

// value evaluates expr in sc.
func (sc *staticScope) value(ctx context.Context, expr hcl.Expression) (cty.Value, error) {
	expr = nativeOf(expr)
	if err := hugeLiteral(expr); err != nil {
		return cty.NilVal, err
	}
	ectx := &hcl.EvalContext{Variables: map[string]cty.Value{}, Functions: sc.funcs}
	vars, locals := map[string]cty.Value{}, map[string]cty.Value{}
	for _, t := range expr.Variables() {
		root := t.RootName()
		switch root {
		case "var", "local":
			name := ""
			if len(t) > 1 {
				if ta, ok := t[1].(hcl.TraverseAttr); ok {
					name = ta.Name
				}
			}
			if name == "" {
				return cty.NilVal, posError(t.SourceRange(), "%s must be followed by a name (%s.NAME)", root, root)
			}
			v, err := sc.named(ctx, root, name, t.SourceRange())
			if err != nil {
				return cty.NilVal, err
			}
			if root == "var" {
				vars[name] = v
			} else {
				locals[name] = v
			}
		case "path":
			// As tofu init run in the root module's directory has them:
			// the module's directory relative to it, "." for itself.
			module, err := filepath.Rel(sc.root, sc.dir)
			if err != nil {
				module = sc.dir
			}
			ectx.Variables["path"] = cty.ObjectVal(map[string]cty.Value{
				"module": cty.StringVal(filepath.ToSlash(module)),
				"root":   cty.StringVal("."),
				"cwd":    cty.StringVal(filepath.ToSlash(sc.root)),
			})
		case "terraform", "tofu":
			ws, err := workspace(sc.root)
			if err != nil {
				return cty.NilVal, posError(t.SourceRange(), "%s.workspace: %v", root, err)
			}
			ectx.Variables[root] = cty.ObjectVal(map[string]cty.Value{"workspace": cty.StringVal(ws)})
		default:
			return cty.NilVal, posError(t.SourceRange(), "%s is not known when modules are installed: a module's source and version may refer to variables, locals, path and terraform.workspace only", root)
		}
	}
	metered(expr)
	if err := checkReferences(expr, vars, locals); err != nil {
		return cty.NilVal, err
	}
	ectx.Variables["var"] = cty.ObjectVal(vars)
	ectx.Variables["local"] = cty.ObjectVal(locals)
	sc.budget.used = 0
	v, diags := expr.Value(ectx)
	if diags.HasErrors() {
		return cty.NilVal, diagError(diags)
	}
	if staticSize(v, maxStaticSize) > maxStaticSize {
		return cty.NilVal, tooLarge(expr.Range(), "its value")
	}
	if !v.IsWhollyKnown() {
		return cty.NilVal, posError(expr.Range(), "not known when modules are installed")
	}
	return v, nil
}

// named is the value of var.NAME or local.NAME (kind) in sc, referred
// to at rng, evaluated once.
func (sc *staticScope) named(ctx context.Context, kind, name string, rng hcl.Range) (cty.Value, error) {
	if err := sc.load(ctx); err != nil {
		return cty.NilVal, err
	}
	key := kind + "." + name
	if v, ok := sc.values[key]; ok {
		return v, nil
	}
	if sc.pending[key] {
		return cty.NilVal, posError(rng, "%s refers to itself, through the values it refers to", key)
	}
	if len(sc.pending) >= maxStaticDepth {
		return cty.NilVal, posError(rng, "%s: more than %d variables and locals, each referring to the next", key, maxStaticDepth)
	}
	sc.pending[key] = true
	defer delete(sc.pending, key)
	var v cty.Value
	var err error
	if kind == "local" {
		a, ok := sc.locals[name]
		if !ok {
			return cty.NilVal, posError(rng, "no local value %q in %s", name, sc.dir)
		}
		v, err = sc.value(ctx, a.Expr)
	} else {
		v, err = sc.variable(name, rng)
	}
	if err != nil {
		return cty.NilVal, err
	}
	sc.values[key] = v
	return v, nil
}

// variable is the value of the variable name in sc (referred to at
// rng): given, passed by its caller, or its default, converted to its
// type.
func (sc *staticScope) variable(name string, rng hcl.Range) (cty.Value, error) {
	decl, ok := sc.vars[name]
	if !ok {
		return cty.NilVal, posError(rng, "no variable %q declared in %s", name, sc.dir)
	}
	var v cty.Value
	if g, ok := sc.given[name]; ok {
		v = g.val
		if g.isRaw {
			var err error
			if v, err = rawValue(g.raw, decl.ty); err != nil {
				return cty.NilVal, fmt.Errorf("%s: %w", g.where, err)
			}
		}
	} else if a, ok := sc.args[name]; ok {
		if a.err != nil {
			return cty.NilVal, a.err
		}
		v = a.val
	} else if decl.def != nil {
		var diags hcl.Diagnostics
		if v, diags = hclfile.Value(decl.def.Expr); diags.HasErrors() {
			return cty.NilVal, diagError(diags)
		}
	} else {
		return cty.NilVal, posError(rng, "variable %q has no value: %s", name, sc.noValue())
	}
	if decl.ty != cty.NilType {
		cv, err := convert.Convert(v, decl.ty)
		if err != nil {
			return cty.NilVal, posError(decl.rng, "variable %q: %v", name, err)
		}
		v = cv
	}
	return v, nil
}

// noValue says where a variable's value would come from.
func (sc *staticScope) noValue() string {
	if sc.caller != "" {
		return sc.caller + " gives it none and it has no default"
	}
	return "give it as tofu init takes it (sync's --var NAME=VALUE or --var-file FILE, terraform.tfvars, *.auto.tfvars, TF_VAR_NAME) or a default"
}

// rawValue reads a value given as a string (-var, TF_VAR_NAME) for a
// variable of type ty: the string itself for a primitive type or none,
// else an HCL literal.
func rawValue(raw string, ty cty.Type) (cty.Value, error) {
	if ty == cty.NilType || ty.IsPrimitiveType() || ty == cty.DynamicPseudoType {
		return cty.StringVal(raw), nil
	}
	expr, diags := hclsyntax.ParseExpression([]byte(raw), "<value>", hcl.InitialPos)
	if diags.HasErrors() {
		return cty.NilVal, diagError(diags)
	}
	v, diags := hclfile.Value(expr)
	if diags.HasErrors() {
		return cty.NilVal, diagError(diags)
	}
	return v, nil
}

// load reads the variable and locals blocks of sc's files, once,
// override files last, their variables' type and default and their
// locals replacing the others'.
func (sc *staticScope) load(ctx context.Context) error {
	if !sc.read {
		sc.read = true
		sc.vars, sc.locals = map[string]*variableDecl{}, map[string]*hcl.Attribute{}
		sc.values, sc.pending = map[string]cty.Value{}, map[string]bool{}
		sc.loadErr = sc.readBlocks(ctx)
	}
	return sc.loadErr
}

// readBlocks reads what load does.
func (sc *staticScope) readBlocks(ctx context.Context) error {
	if sc.isRoot {
		if err := sc.readGiven(); err != nil {
			return err
		}
	}
	for _, path := range primaryThenOverrides(sc.files) {
		blocks, err := blocksOf(ctx, path, staticSchema)
		if err != nil {
			return err
		}
		for _, b := range blocks {
			if b.Type == "locals" {
				attrs, diags := b.Body.JustAttributes()
				if diags.HasErrors() {
					return diagError(diags)
				}
				for name, a := range attrs {
					sc.locals[name] = a
				}
				continue
			}
			if err := sc.declare(b); err != nil {
				return err
			}
		}
	}
	return nil
}

// declare takes the variable block b.
func (sc *staticScope) declare(b *hcl.Block) error {
	content, _, diags := b.Body.PartialContent(variableSchema)
	if diags.HasErrors() {
		return diagError(diags)
	}
	d := sc.vars[b.Labels[0]]
	if d == nil {
		d = &variableDecl{ty: cty.NilType, rng: b.DefRange}
		sc.vars[b.Labels[0]] = d
	}
	if a, ok := content.Attributes["type"]; ok {
		ty, diags := typeexpr.TypeConstraint(a.Expr)
		if diags.HasErrors() {
			return diagError(diags)
		}
		d.ty = ty
	}
	if a, ok := content.Attributes["default"]; ok {
		d.def = a
	}
	return nil
}

// staticFunctions are the functions a static evaluation calls: those of
// OpenTofu's that need no provider or the network, but file (functions).
var staticFunctions = map[string]function.Function{
	"abs": stdlib.AbsoluteFunc, "ceil": stdlib.CeilFunc, "chomp": stdlib.ChompFunc,
	"coalesce": stdlib.CoalesceFunc, "coalescelist": stdlib.CoalesceListFunc, "compact": stdlib.CompactFunc,
	"concat": stdlib.ConcatFunc, "contains": stdlib.ContainsFunc, "distinct": stdlib.DistinctFunc,
	"element": stdlib.ElementFunc, "flatten": stdlib.FlattenFunc, "floor": stdlib.FloorFunc,
	"format": stdlib.FormatFunc, "formatlist": stdlib.FormatListFunc, "indent": stdlib.IndentFunc,
	"index": stdlib.IndexFunc, "join": stdlib.JoinFunc, "jsondecode": stdlib.JSONDecodeFunc,
	"jsonencode": stdlib.JSONEncodeFunc, "keys": stdlib.KeysFunc, "length": stdlib.LengthFunc,
	"lookup": stdlib.LookupFunc, "lower": stdlib.LowerFunc, "max": stdlib.MaxFunc,
	"merge": stdlib.MergeFunc, "min": stdlib.MinFunc, "parseint": stdlib.ParseIntFunc,
	"regex": stdlib.RegexFunc, "regexall": stdlib.RegexAllFunc, "replace": replaceFunc,
	"reverse": stdlib.ReverseListFunc, "slice": stdlib.SliceFunc, "sort": stdlib.SortFunc,
	"split": stdlib.SplitFunc, "strrev": stdlib.ReverseFunc, "substr": stdlib.SubstrFunc,
	"title": stdlib.TitleFunc, "trim": stdlib.TrimFunc, "trimprefix": stdlib.TrimPrefixFunc,
	"trimsuffix": stdlib.TrimSuffixFunc, "trimspace": stdlib.TrimSpaceFunc, "upper": stdlib.UpperFunc,
	"values": stdlib.ValuesFunc, "zipmap": stdlib.ZipmapFunc,
	"tostring": stdlib.MakeToFunc(cty.String), "tonumber": stdlib.MakeToFunc(cty.Number),
	"tobool": stdlib.MakeToFunc(cty.Bool), "tolist": stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)),
	"tomap": stdlib.MakeToFunc(cty.Map(cty.DynamicPseudoType)), "toset": stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
	"try": tryfunc.TryFunc, "can": tryfunc.CanFunc,
	"startswith": stringTest(strings.HasPrefix), "endswith": stringTest(strings.HasSuffix),
	"strcontains":  stringTest(strings.Contains),
	"base64encode": base64Func(true), "base64decode": base64Func(false),
	"chunklist": stdlib.ChunklistFunc, "csvdecode": stdlib.CSVDecodeFunc, "formatdate": stdlib.FormatDateFunc,
	"log": stdlib.LogFunc, "pow": stdlib.PowFunc, "range": stdlib.RangeFunc, "signum": stdlib.SignumFunc,
	"setintersection": stdlib.SetIntersectionFunc, "setproduct": stdlib.SetProductFunc,
	"setsubtract": stdlib.SetSubtractFunc, "setunion": stdlib.SetUnionFunc, "timeadd": stdlib.TimeAddFunc,
	"alltrue": boolsFunc(true), "anytrue": boolsFunc(false), "one": oneFunc, "sum": sumFunc,
}

// boolsFunc is alltrue (all) or anytrue of a list of bools, a null one
// false.
func boolsFunc(all bool) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "list", Type: cty.List(cty.Bool)}},
		Type:   function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			for _, v := range args[0].AsValueSlice() {
				if (!v.IsNull() && v.True()) != all {
					return cty.BoolVal(!all), nil
				}
			}
			return cty.BoolVal(all), nil
		},
	})
}

// collection says whether ty is a list, a set or a tuple.
func collection(ty cty.Type) bool { return ty.IsListType() || ty.IsSetType() || ty.IsTupleType() }

// oneFunc is one: the element of a collection of one, null for none.
var oneFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "list", Type: cty.DynamicPseudoType}},
	Type: func(args []cty.Value) (cty.Type, error) {
		switch ty := args[0].Type(); {
		case ty.IsListType() || ty.IsSetType():
			return ty.ElementType(), nil
		case ty.IsTupleType() && len(ty.TupleElementTypes()) < 2:
			if len(ty.TupleElementTypes()) == 0 {
				return cty.DynamicPseudoType, nil
			}
			return ty.TupleElementTypes()[0], nil
		}
		return cty.NilType, errors.New("must be a list, set or tuple of no more than one element")
	},
	Impl: func(args []cty.Value, ty cty.Type) (cty.Value, error) {
		if args[0].IsNull() {
			return cty.NilVal, errors.New("must not be null")
		}
		switch vs := args[0].AsValueSlice(); len(vs) {
		case 0:
			return cty.NullVal(ty), nil
		case 1:
			return vs[0], nil
		}
		return cty.NilVal, errors.New("must have no more than one element")
	},
})

// sumFunc is sum: the total of a collection of numbers, of one at least.
var sumFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "list", Type: cty.DynamicPseudoType}},
	Type:   function.StaticReturnType(cty.Number),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		if !collection(args[0].Type()) || args[0].IsNull() || args[0].LengthInt() == 0 {
			return cty.NilVal, errors.New("must be a list, set or tuple of one number at least")
		}
		total := cty.Zero
		for _, v := range args[0].AsValueSlice() {
			n, err := convert.Convert(v, cty.Number)
			if err != nil || n.IsNull() {
				return cty.NilVal, errors.New("each element must be a number")
			}
			total = total.Add(n)
		}
		return total, nil
	},
})

// inConfiguration is path, its links resolved, when it is within the
// root module's directory root (its links resolved): the configuration
// may be a stranger's, and sync runs as the mirror's user, who may read
// the mirror's secrets.
func inConfiguration(root, path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	if !within(realRoot, real) {
		return "", fmt.Errorf("outside the configuration directory %s (or leads out of it)", root)
	}
	return real, nil
}

// maxWorkspaceFile bounds what is read of .terraform/environment.
const maxWorkspaceFile = 1024

// workspace is the workspace tofu init in the root module's directory
// root has selected: TF_WORKSPACE, else the one its .terraform directory
// names, else "default". The file is read as an operator's file is
// (no FIFO, no device), within root, up to maxWorkspaceFile bytes.
func workspace(root string) (string, error) {
	if ws := os.Getenv("TF_WORKSPACE"); ws != "" {
		return ws, nil
	}
	path := filepath.Join(root, ".terraform", "environment")
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return "default", nil
	}
	real, err := inConfiguration(root, path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	b, err := inputfile.ReadOperator(real, maxWorkspaceFile)
	if err != nil {
		return "", err
	}
	if ws := strings.TrimSpace(string(b)); ws != "" && len(ws) < 256 {
		return ws, nil
	}
	return "default", nil
}

// functions are staticFunctions and file, which reads a path relative to
// the root module's directory root, as tofu init run there does, of that
// directory only (where tofu init reads any file).
func functions(root string) map[string]function.Function {
	fs := make(map[string]function.Function, len(staticFunctions)+1)
	for name, f := range staticFunctions {
		fs[name] = f
	}
	fs["file"] = function.New(&function.Spec{
		Params: []function.Parameter{{Name: "path", Type: cty.String}},
		Type:   function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			path := filepath.FromSlash(args[0].AsString())
			if !filepath.IsAbs(path) {
				path = filepath.Join(root, path)
			}
			real, err := inConfiguration(root, path)
			if err != nil {
				return cty.NilVal, fmt.Errorf("%s: %w: file() reads the files of the directory sync is given only", args[0].AsString(), err)
			}
			b, err := inputfile.ReadOperator(real, hclfile.MaxBytes)
			if err != nil {
				return cty.NilVal, err
			}
			if !utf8.Valid(b) {
				return cty.NilVal, fmt.Errorf("%s is not UTF-8 text", path)
			}
			return cty.StringVal(string(b)), nil
		},
	})
	return fs
}

// stringTest is a function of two strings that says whether test holds
// of them (startswith, endswith, strcontains).
func stringTest(test func(s, sub string) bool) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "str", Type: cty.String}, {Name: "substr", Type: cty.String}},
		Type:   function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return cty.BoolVal(test(args[0].AsString(), args[1].AsString())), nil
		},
	})
}

// base64Func is base64encode (encode) or base64decode.
func base64Func(encode bool) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "str", Type: cty.String}},
		Type:   function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			s := args[0].AsString()
			if encode {
				return cty.StringVal(base64.StdEncoding.EncodeToString([]byte(s))), nil
			}
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil || !utf8.Valid(b) {
				return cty.NilVal, errors.New("not base64 of UTF-8 text")
			}
			return cty.StringVal(string(b)), nil
		},
	})
}

// replaceFunc is replace as the clients have it: a substring written
// /like this/ is a regular expression.
var replaceFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "str", Type: cty.String}, {Name: "substr", Type: cty.String}, {Name: "replace", Type: cty.String}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		str, sub, repl := args[0].AsString(), args[1].AsString(), args[2].AsString()
		if len(sub) > 1 && sub[0] == '/' && sub[len(sub)-1] == '/' {
			re, err := regexp.Compile(sub[1 : len(sub)-1])
			if err != nil {
				return cty.NilVal, errors.New("invalid regular expression: " + err.Error())
			}
			return cty.StringVal(re.ReplaceAllString(str, repl)), nil
		}
		return cty.StringVal(strings.ReplaceAll(str, sub, repl)), nil
	},
})
