package hclfile

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclparse"
)

// nest is open n times, inner, then close n times.
func nest(open, inner, close string, n int) string {
	return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
}

// TestDepthRefused: every construct HCL's parsers recurse on is counted,
// in native syntax and in JSON, and a file nested deeper than MaxDepth is
// refused unparsed with the line where it passes the bound. A hundred
// thousand levels of any of them kill the process without the check
// (fatal error: stack overflow, which no recover catches).
func TestDepthRefused(t *testing.T) {
	const deep = 100000
	for _, tc := range []struct {
		name, file, body string
		line             int
	}{
		{"brackets", "a.hcl", "a = " + nest("[", "1", "]", deep), 1},
		{"parentheses", "a.hcl", "a = " + nest("(", "1", ")", deep), 1},
		{"objects", "a.hcl", "a = " + nest("{b = ", "1", "}", deep), 1},
		{"blocks", "a.hcl", nest("b {\n", "", "}\n", deep), MaxDepth},
		{"function calls", "a.hcl", "a = " + nest("f(", "1", ")", deep), 1},
		{"interpolations", "a.hcl", "a = " + nest(`"${`, "1", `}"`, deep), 1},
		{"directives", "a.hcl", "a = \"" + nest("%{ if true }", "x", "%{ endif }", deep) + "\"", 1},
		{"heredoc interpolations", "a.hcl", "a = <<EOT\n" + nest("${", "1", "}", deep) + "\nEOT\n", 2},
		{"not", "a.hcl", "a = " + strings.Repeat("!", deep) + "true", 1},
		{"minus", "a.hcl", "a = " + strings.Repeat("-", deep) + "1", 1},
		{"minus spaced", "a.hcl", "a = " + strings.Repeat("- ", deep) + "1", 1},
		{"conditionals", "a.hcl", "a = " + strings.Repeat("x ? 1 : ", deep) + "2", 1},
		{"conditionals over lines", "a.hcl", "a = (\n" + strings.Repeat("x ?\n1 :\n", deep) + "2)", 2 * (MaxDepth - 1)}, // the body, the parenthesis and one conditional every two lines
		{"after comments and strings", "a.hcl", "# ((((\n/* [[[[\n */\nb = \"{{{{\"\na = " + nest("[", "1", "]", deep), 5},
		{"json arrays", "a.json", `{"a": ` + nest("[", "1", "]", deep) + "}", 1},
		{"json objects", "a.json", nest(`{"a": `, "1", "}", deep), 1},
		{"json templates", "a.json", `{"a": "` + nest("${", "1", "}", deep) + `"}`, 1},
		{"json template strings", "a.json", `{"a": "` + nest(`${\"`, "1", `\"}`, deep) + `"}`, 1},
		{"JSON by any case", "a.JSON", nest("[", "1", "]", deep), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.file)
			if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			f, diags, err := Parse(nil, path)
			if err != nil {
				t.Fatal(err)
			}
			if f != nil || len(diags) != 1 || diags[0].Summary != "Nesting too deep" {
				t.Fatalf("not refused: %v", diags)
			}
			if got := diags[0].Subject; got == nil || got.Filename != path || got.Start.Line != tc.line {
				t.Errorf("refused at %v, want %s:%d", got, path, tc.line)
			}
			if msg := Summary(diags); !strings.HasPrefix(msg, path+":") {
				t.Errorf("summary %q does not start with the file", msg)
			}
		})
	}
}

// TestDepthAccepted: what does not nest (brackets in strings, comments,
// heredocs and escaped template sequences, binary operators, traversals,
// many items each a little nested) is accepted however long, and nesting
// up to MaxDepth levels parses.
func TestDepthAccepted(t *testing.T) {
	const many = 2000
	for _, tc := range []struct{ name, file, body string }{
		{"strings", "a.hcl", `a = "` + strings.Repeat("(([[{{", many) + `"`},
		{"escaped quotes", "a.hcl", `a = "` + strings.Repeat(`\"((`, many) + `"`},
		{"escaped sequences", "a.hcl", `a = "` + strings.Repeat("$${%%{((", many) + `"`},
		{"comments", "a.hcl", strings.Repeat("# ((((\n// [[[[\n/* {{{{ */\n", many) + "a = 1\n"},
		{"heredoc", "a.hcl", "a = <<-EOT\n" + strings.Repeat("((([[[{{{\n", many) + "  EOT\nb = 1\n"},
		{"heredoc with interpolations", "a.hcl", "a = <<EOT\n" + strings.Repeat("${x} (( ${y}\n", many) + "EOT\n"},
		{"binary operators", "a.hcl", "a = 1" + strings.Repeat(" - 1 + x && !y || -z", many)},
		{"negative numbers", "a.hcl", "a = [" + strings.Repeat("-1, ", many) + "-1]"},
		{"a conditional per item", "a.hcl", strings.Repeat("a = x ? !y : -1\n", 1) + "b = [" + strings.Repeat("x ? 1 : 2, ", many) + "3]"},
		{"directives in sequence", "a.hcl", `a = "` + strings.Repeat("%{ if x }y%{ endif }", many) + `"`},
		{"traversals", "a.hcl", "a = x" + strings.Repeat(".b[0]", many)},
		{"blocks", "a.hcl", strings.Repeat("b \"l\" {\n  c { d = [1, {e = (2)}] }\n}\n", many)},
		{"json", "a.json", `{"a": [` + strings.Repeat(`{"b": [1, "(((${x}"]}, `, many) + `1]}`},
		{"nested to the bound", "a.hcl", "a = " + nest("[", "1", "]", MaxDepth-1)},
		{"blocks to the bound", "a.hcl", nest("b {\n", "a = 1\n", "}\n", MaxDepth-1)},
		{"json to the bound", "a.json", nest("[", "1", "]", MaxDepth)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.file)
			if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, diags, err := Parse(nil, path)
			if err != nil || diags.HasErrors() {
				t.Fatalf("refused: %v %v", err, diags)
			}
		})
	}
	// One level more than the bound is refused.
	if d := checkBounds([]byte("a = "+nest("[", "1", "]", MaxDepth)), "a.hcl", false); d == nil {
		t.Error("a file nested MaxDepth+1 levels (the body and MaxDepth brackets) is accepted")
	}
	if d := checkBounds([]byte(nest("[", "1", "]", MaxDepth+1)), "a.json", true); d == nil {
		t.Error("a JSON file nested MaxDepth+1 levels is accepted")
	}
}

// TestDepthRealFiles: the HCL of the documentation (configuration files,
// policies, manifests) is all accepted and none comes near the bound.
func TestDepthRealFiles(t *testing.T) {
	docs, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	docs = append(docs, filepath.Join("..", "..", "README.md"))
	n := 0
	for _, doc := range docs {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, block := range strings.Split(string(text), "```hcl\n")[1:] {
			src := []byte(block[:strings.Index(block, "```")])
			if _, diags := hclparse.NewParser().ParseHCL(src, doc); diags.HasErrors() {
				continue // a fragment
			}
			n++
			if line := scanNative(src, MaxDepth/4, math.MaxInt).err; line != 0 {
				t.Errorf("%s, block %d, line %d nests more than %d levels", doc, i+1, line, MaxDepth/4)
			}
		}
	}
	if n < 10 {
		t.Fatalf("only %d blocks checked", n)
	}
}

// TestDepthBoundedMemory: the check of a 4 MiB file nested all the way
// down allocates next to nothing: it stops at the bound and builds no
// tokens.
func TestDepthBoundedMemory(t *testing.T) {
	src := []byte("a = " + nest("[", "1", "]", 2<<20))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	d := checkBounds(src, "a.hcl", false)
	runtime.ReadMemStats(&after)
	if d == nil {
		t.Fatal("not refused")
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<10 {
		t.Errorf("the check allocated %d bytes", alloc)
	}
}

// FuzzCheckDepth: the check never panics nor loops on any input, broken
// strings, heredocs and templates included, and what it accepts is
// handed to HCL's parsers as Parse would.
func FuzzCheckDepth(f *testing.F) {
	for _, seed := range []string{
		"a = [[[1]]]", `a = "${"${x}"}"`, "a = <<EOT\n${x}\nEOT\n", "a = !!!-x ? 1 : 2",
		"b { c { d = {e = (1)} } }", `a = "%{ if x }y%{ endif }"`, "# {\n/* [ */ a = 1",
		`{"a": [{"b": "${x}"}]}`, "a = \"\\\"(\"", "a = <<-X\n  X\n",
	} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	f.Fuzz(func(t *testing.T, src string, isJSON bool) {
		if d := checkBounds([]byte(src), "f.hcl", isJSON); d != nil {
			return
		}
		p := hclparse.NewParser()
		if isJSON {
			p.ParseJSON([]byte(src), "f.json")
		} else {
			p.ParseHCL([]byte(src), "f.hcl")
		}
	})
}
