package hclfile

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// wideFiles are files within the byte bound whose tokens (a couple of
// million, each a struct of HCL's scanner and often a node of its
// parser) would take gigabytes to parse: a 16 MiB tuple of ones took
// 13 GiB of allocations and held 5 GiB.
var wideFiles = []struct{ name, src string }{
	{"tuple.tf", "a = [" + strings.Repeat("1,", 1<<20) + "1]\n"},
	{"operators.tf", "a = 1" + strings.Repeat("+1", 1<<20) + "\n"},
	{"newlines.tf", strings.Repeat("\n", 2<<20)},
	{"comments.tf", strings.Repeat("#\n", 1<<20)},
	{"heredoc.tf", "a = <<E\n" + strings.Repeat("x\n", 1<<20) + "E\n"},
	{"interpolations.tf", `a = "` + strings.Repeat("${x}", 1<<19) + "\"\n"},
	{"tuple.tf.json", `{"a":[` + strings.Repeat("1,", 1<<20) + "1]}\n"},
	{"templates.tf.json", `{"a":"` + strings.Repeat("${x}", 1<<19) + "\"}\n"},
	// Parsed as a template when it is evaluated (HCL's scanner ends the
	// text at each $ and newline).
	{"dollars.tf.json", `{"a":"` + strings.Repeat("$a", 1<<19) + "\"}\n"},
	{"escaped newlines.tf.json", `{"a":"` + strings.Repeat(`\n`, 1<<19) + "\"}\n"},
}

// TestWideFilesRefused: a file of more tokens than MaxTokens is refused
// unparsed, with its file:line, having taken memory for its bytes only.
func TestWideFilesRefused(t *testing.T) {
	for _, tc := range wideFiles {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.name)
			if err := os.WriteFile(path, []byte(tc.src), 0o644); err != nil {
				t.Fatal(err)
			}
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			f, diags, err := Parse(nil, path)
			runtime.ReadMemStats(&m1)
			if err != nil {
				t.Fatal(err)
			}
			if f != nil || len(diags) != 1 || diags[0].Summary != "Too many tokens" || !strings.HasPrefix(Summary(diags), path+":") {
				t.Errorf("a file of %d bytes and millions of tokens: %v", len(tc.src), Summary(diags))
			}
			// The bytes, and a JSON string's template unquoted and copied.
			if a := m1.TotalAlloc - m0.TotalAlloc; a > 8*uint64(len(tc.src))+1<<20 {
				t.Errorf("a %d KiB file took %d MiB", len(tc.src)>>10, a>>20)
			}
		})
	}
}

// TestLargeFileRefused: a file larger than MaxBytes is refused, read no
// further than the bound, whether it says its size or not (a pipe).
func TestLargeFileRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.hcl")
	if err := os.WriteFile(path, []byte("# "+strings.Repeat("x", 17<<20)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, diags, err := Parse(nil, path)
	if err != nil {
		t.Fatal(err)
	}
	if f != nil || len(diags) != 1 || diags[0].Summary != "File too large" || !strings.HasPrefix(Summary(diags), path+":") {
		t.Errorf("a 17 MiB file: %v", Summary(diags))
	}
}

// lexTokens is how many tokens HCL's own scanner makes of src, its end
// of file left out.
func lexTokens(src []byte) int {
	toks, _ := hclsyntax.LexConfig(src, "f.tf", hcl.InitialPos)
	return len(toks) - 1
}

// TestTokenCountCoversHCLScanner: on the wide files and on real HCL, the
// count is never below what HCL's scanner makes, so that MaxTokens bounds
// what HCL builds; and on real files not far above it.
func TestTokenCountCoversHCLScanner(t *testing.T) {
	srcs := []string{"a = 1-1-1-foo-bar.baz[0]", "a = <<-E\n  x ${y} %{ if z }w%{ endif }\n  E\n", "a = \"é☃${x}\" # c\n/* d */", "b \"l\" { c = {d = [1.5e3, !true]} }"}
	for _, tc := range wideFiles {
		if !strings.HasSuffix(tc.name, ".json") {
			srcs = append(srcs, tc.src[:64<<10]) // the pattern repeats
		}
	}
	for _, src := range srcs {
		if got, lexed := scanNative([]byte(src), math.MaxInt, math.MaxInt).tokens, lexTokens([]byte(src)); got < lexed {
			t.Errorf("%.40q: counted %d tokens, HCL makes %d", src, got, lexed)
		}
	}
	docs, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	var all []byte
	for _, doc := range docs {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range strings.Split(string(text), "```hcl\n")[1:] {
			all = append(all, block[:strings.Index(block, "```")]...)
		}
	}
	got, lexed := scanNative(all, math.MaxInt, math.MaxInt).tokens, lexTokens(all)
	if got < lexed || got > 2*lexed {
		t.Errorf("the documentation's HCL, %d bytes: counted %d tokens, HCL makes %d", len(all), got, lexed)
	}
	t.Logf("the documentation's HCL, %d bytes: counted %d tokens, HCL makes %d", len(all), got, lexed)
}

// FuzzTokenCount: on any UTF-8 input the count is never below the tokens
// HCL's scanner makes, but for two at most where a string, a comment or an
// escape is cut off by the end of the file.
func FuzzTokenCount(f *testing.F) {
	for _, tc := range []string{"a = 1-1", "a = <<E\nx\nE\n", `a = "${x}${y}"`, "# c\n// d\n/* e */", "a = \"\\\"\" ☃", "x = a.b[0].c", "a = 1 ? 2 : 3 == 4 && !5"} {
		f.Add(tc)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if !utf8.ValidString(src) {
			return // refused before it is scanned
		}
		if got, lexed := scanNative([]byte(src), math.MaxInt, math.MaxInt).tokens, lexTokens([]byte(src)); got+2 < lexed {
			t.Fatalf("%q: counted %d tokens, HCL makes %d", src, got, lexed)
		}
	})
}

// TestInvalidUTF8Refused: a file that is not UTF-8 is refused unparsed
// with the line of its first bad byte. HCL's scanner reads a bad byte with
// what follows it, so that "\xda#" starts a name where the check saw a
// comment: a line of a million brackets behind it overflowed the stack.
func TestInvalidUTF8Refused(t *testing.T) {
	for name, src := range map[string]string{
		"comment.tf": "b = 1\na = \xda#" + nest("[", "1", "]", 1000000) + "\n",
		"string.tf":  "b = 1\na = \"\xda\"\n",
		"a.tf.json":  "{\n\"a\": \"\xda\"}\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), name)
			if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			f, diags, err := Parse(nil, path)
			if err != nil {
				t.Fatal(err)
			}
			if f != nil || len(diags) != 1 || diags[0].Summary != "Invalid UTF-8" || !strings.HasPrefix(Summary(diags), path+":2,") {
				t.Errorf("%s: %.300v", name, Summary(diags))
			}
		})
	}
}
