package hclfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
)

// MaxDepth is the deepest nesting a file may hold. HCL's parsers recurse
// once per level, and Go does not turn a stack that outgrows its limit
// into an error: a file nested a few hundred thousand levels deep kills
// the process (fatal error: stack overflow) after taking a gigabyte of
// stack. Real files nest a dozen levels; 64 leaves room for any of them.
const MaxDepth = 64

// MaxTokens is the most tokens a file may hold, counted as HCL's scanner
// would make them, a little generously (each punctuation byte, each word,
// each line of text or comment). HCL builds a struct for each token and
// often a node of the syntax tree, a few hundred bytes in all: two million
// tokens fit in 2 MiB ("1,1,1,..." or empty lines) and took over a
// gigabyte to parse. Real files run at four or more bytes a token, so
// this bound is some 2 MiB of real HCL, and at most a couple of hundred
// MiB of memory for any file.
const MaxTokens = 1 << 19

// A level is one thing that nests in HCL native syntax: a bracket, a
// brace or a parenthesis, a template's interpolation or directive, a
// quoted string or heredoc (a template, parsed by recursion too).
type level struct {
	kind   byte   // one of the kinds below
	marker []byte // a heredoc's closing marker
	cond   int    // conditionals (or a template's if and for) open in the current item
	unary  int    // unary operators in a row before the current operand
	midln  bool   // a heredoc not at the start of a line
}

const (
	kBody    = 'b' // the file's top level
	kParen   = '('
	kBrack   = '['
	kBrace   = '{'
	kInterp  = '$' // ${ ... } or %{ ... }: an expression in a template
	kQuoted  = '"' // a quoted template
	kHeredoc = '<' // a heredoc template
	kBare    = 't' // a template with no delimiters (a JSON string's)
	kJSON    = 'j' // a JSON object or array
)

// depthScanner walks a file's bytes once as HCL's scanner would, without
// building tokens, to find where its nesting first passes MaxDepth. It
// follows the scanner's modes (expressions, quoted strings with escapes,
// heredocs and their closing marker, comments, template sequences) so
// that a bracket inside a string or comment is not counted and one inside
// an interpolation is. Beyond brackets it counts what the parser also
// recurses on without a bracket: a run of unary operators (!!!x, - -x), a
// chain of conditionals (a ? b : c ? d : ...), a template's nested
// %{ if } and %{ for }. Its memory is bounded by MaxDepth levels.
type depthScanner struct {
	src   []byte
	i     int
	line  int
	stack []level
	depth int // levels on the stack plus their extra
	max   int
	err   int // the line where the depth or the tokens first passed their bound; 0: never

	tokens    int
	maxTokens int
	tooMany   bool // err is where the tokens passed maxTokens
}

// token counts one token.
func (s *depthScanner) token() {
	if s.tokens++; s.tokens > s.maxTokens && s.err == 0 {
		s.err, s.tooMany = s.line, true
	}
}

func (s *depthScanner) push(l level) {
	s.stack = append(s.stack, l)
	s.depth++
	s.check()
}

// pop closes the innermost level; what it was an operand of is done.
func (s *depthScanner) pop() {
	top := &s.stack[len(s.stack)-1]
	s.depth -= 1 + top.cond + top.unary
	s.stack = s.stack[:len(s.stack)-1]
	if len(s.stack) > 0 {
		s.operand()
	}
}

func (s *depthScanner) top() *level { return &s.stack[len(s.stack)-1] }

// addCond counts a conditional, or a template's if or for.
func (s *depthScanner) addCond() {
	s.top().cond++
	s.depth++
	s.check()
}

// addUnary counts a unary operator.
func (s *depthScanner) addUnary() {
	s.top().unary++
	s.depth++
	s.check()
}

// operand ends a run of unary operators: they apply to it.
func (s *depthScanner) operand() {
	t := s.top()
	s.depth -= t.unary
	t.unary = 0
}

// endItem ends an attribute, an argument or an item: its conditionals
// and unary operators are done.
func (s *depthScanner) endItem() {
	t := s.top()
	s.depth -= t.cond + t.unary
	t.cond, t.unary = 0, 0
}

func (s *depthScanner) check() {
	if s.depth > s.max && s.err == 0 {
		s.err = s.line
	}
}

// scanNative scans HCL native syntax from its top level, to the first
// line where the nesting passes maxDepth or the tokens maxTokens.
func scanNative(src []byte, maxDepth, maxTokens int) *depthScanner {
	s := &depthScanner{src: src, line: 1, max: maxDepth, maxTokens: maxTokens}
	s.stack = append(s.stack, level{kind: kBody})
	s.depth = 1
	s.check()
	s.run()
	return s
}

// scanTemplate scans src as a template with no delimiters, nested base
// levels deep (the string one more), starting at line, with maxTokens
// tokens allowed.
func scanTemplate(src []byte, base, line, max, maxTokens int) *depthScanner {
	s := &depthScanner{src: src, line: line, max: max, depth: base, maxTokens: maxTokens}
	s.stack = append(s.stack, level{kind: kBare})
	s.depth++
	s.check()
	s.run()
	return s
}

func (s *depthScanner) run() {
	for s.i < len(s.src) && s.err == 0 && len(s.stack) > 0 {
		switch s.top().kind {
		case kQuoted, kHeredoc, kBare:
			s.template()
		default:
			s.expression()
		}
	}
}

// template scans template text up to its end or an interpolation.
func (s *depthScanner) template() {
	t := s.top()
	if t.kind == kHeredoc && !t.midln {
		// At the start of a line: is it the closing marker?
		end := bytes.IndexByte(s.src[s.i:], '\n')
		if end >= 0 && bytes.Equal(bytes.TrimSpace(s.src[s.i:s.i+end]), t.marker) {
			s.i += end // the newline ends the attribute: scanned as an expression's
			s.token()
			s.pop()
			return
		}
	}
	s.token() // the text up to the end, an interpolation or a line's end
	for s.i < len(s.src) {
		c := s.src[s.i]
		if c == '$' || c == '%' || c == '\n' || c == '\r' {
			// HCL's scanner ends the text before each and starts
			// another after it; as it does a byte that is no UTF-8.
			s.token()
			s.token()
		} else if c >= utf8.RuneSelf {
			if r, n := utf8.DecodeRune(s.src[s.i:]); r == utf8.RuneError && n == 1 {
				s.token()
				s.token()
			}
		}
		switch {
		case c == '\n':
			s.line++
			s.i++
			if t.kind == kHeredoc {
				t.midln = false
				return
			}
		case c == '\\' && t.kind == kQuoted:
			s.i += 2
			if s.i <= len(s.src) && s.src[s.i-1] == '\n' {
				s.line++
			}
		case c == '"' && t.kind == kQuoted:
			s.i++
			s.token()
			s.pop()
			return
		case (c == '$' || c == '%') && s.i+1 < len(s.src):
			next := s.src[s.i+1]
			if next == c && s.i+2 < len(s.src) && s.src[s.i+2] == '{' {
				s.i += 3 // $${ and %%{ are literal
				continue
			}
			if next != '{' {
				s.i++
				continue
			}
			s.i += 2
			t.midln = true
			s.token() // the ${ or %{
			if c == '%' {
				s.directive()
			}
			s.push(level{kind: kInterp})
			return
		default:
			s.i++
			t.midln = true
		}
	}
}

// directive counts a template's %{ if } and %{ for }, which the template
// parser nests by recursion until their %{ endif } and %{ endfor }.
func (s *depthScanner) directive() {
	j := s.i
	for j < len(s.src) && (s.src[j] == '~' || s.src[j] == ' ' || s.src[j] == '\t') {
		j++
	}
	word := func(w string) bool {
		k := j + len(w)
		return bytes.HasPrefix(s.src[j:], []byte(w)) && (k == len(s.src) || !identByte(s.src[k]))
	}
	switch {
	case word("if"), word("for"):
		s.addCond()
	case word("endif"), word("endfor"):
		if t := s.top(); t.cond > 0 {
			t.cond--
			s.depth--
		}
	}
}

// expression scans expression text up to a change of mode.
func (s *depthScanner) expression() {
	for s.i < len(s.src) && s.err == 0 {
		c := s.src[s.i]
		if startsToken(s.src, s.i) {
			s.token()
		}
		switch c {
		case '\n':
			s.line++
			s.i++
			if k := s.top().kind; k == kBody || k == kBrace {
				s.endItem() // a new attribute or item
			}
		case ',':
			s.i++
			s.endItem()
		case '#':
			s.comment(1)
		case '/':
			switch {
			case s.i+1 < len(s.src) && s.src[s.i+1] == '/':
				s.comment(2)
			case s.i+1 < len(s.src) && s.src[s.i+1] == '*':
				end := bytes.Index(s.src[s.i+2:], []byte("*/"))
				if end < 0 {
					// Not a comment to HCL's scanner, which goes on
					// with a slash, a star and what follows.
					s.i++
					continue
				}
				s.line += bytes.Count(s.src[s.i:s.i+2+end], []byte("\n"))
				s.i += 2 + end + 2
			default:
				s.i++
			}
		case '(', '[', '{':
			s.i++
			s.push(level{kind: c})
		case ')', ']':
			s.i++
			if k := s.top().kind; k == c-1 || k == c-2 { // '(' is ')'-1, '[' is ']'-2
				s.pop()
			}
		case '}':
			s.i++
			// As HCL's scanner: a brace closes the innermost brace or
			// template sequence, and what is open inside it.
			for len(s.stack) > 1 && s.top().kind != kBrace && s.top().kind != kInterp {
				s.pop()
			}
			if k := s.top().kind; k == kBrace || k == kInterp {
				s.pop()
				return
			}
		case '"':
			s.i++
			s.push(level{kind: kQuoted})
			return
		case '<':
			if m, n := heredocIntro(s.src[s.i:]); n > 0 {
				s.i += n
				s.line++
				s.push(level{kind: kHeredoc, marker: m})
				return
			}
			s.i++
		case '!':
			s.i++
			if s.i < len(s.src) && s.src[s.i] == '=' {
				s.i++
				continue
			}
			s.addUnary()
		case '?':
			s.i++
			s.addCond()
		case '-':
			if s.unary() {
				s.addUnary()
			} else if identByte(s.src[max(s.i-1, 0)]) {
				s.operand() // inside a name: foo-bar
			}
			s.i++
		default:
			if identByte(c) || c >= utf8.RuneSelf {
				s.operand()
			}
			if c >= utf8.RuneSelf {
				_, n := utf8.DecodeRune(s.src[s.i:]) // counted once; a byte that is no character, once each
				s.i += n
				continue
			}
			s.i++
		}
	}
}

// comment skips a one-line comment that starts with n bytes.
func (s *depthScanner) comment(n int) {
	end := bytes.IndexByte(s.src[s.i+n:], '\n')
	if end < 0 {
		s.i = len(s.src)
		return
	}
	s.i += n + end // the newline is scanned as such
}

// unary reports whether the minus at s.i is a unary one: nothing that
// ends an operand comes before it. A minus right after a name's letters
// and dashes is part of the name (foo--bar); after a number's digits and
// minuses, the first is a subtraction and the others unary (1--1).
func (s *depthScanner) unary() bool {
	j := s.i - 1
	for j >= 0 && (s.src[j] == ' ' || s.src[j] == '\t' || s.src[j] == '\r') {
		j--
	}
	if j < 0 {
		return true
	}
	switch c := s.src[j]; {
	case c == ')' || c == ']' || c == '}' || c == '"':
		return false
	case c == '-' && j == s.i-1:
		// Walk back over the word the minus follows.
		k := j
		for k > 0 && (identByte(s.src[k-1]) || s.src[k-1] >= utf8.RuneSelf) {
			k--
		}
		start := s.src[k]
		return !(start == '_' || start >= utf8.RuneSelf || start >= 'a' && start <= 'z' || start >= 'A' && start <= 'Z')
	case c == '-':
		return true
	case identByte(c) || c >= utf8.RuneSelf:
		return false
	}
	return true
}

// heredocIntro is the marker of the heredoc that b opens (<<EOT or
// <<-EOT, and a newline) and the introducer's length; n is 0 when b opens
// none.
func heredocIntro(b []byte) (marker []byte, n int) {
	if !bytes.HasPrefix(b, []byte("<<")) {
		return nil, 0
	}
	j := 2
	if j < len(b) && b[j] == '-' {
		j++
	}
	start := j
	for j < len(b) {
		r, size := utf8.DecodeRune(b[j:])
		ok := r == '_' || unicode.IsLetter(r) || unicode.Is(unicode.Nl, r) ||
			j > start && (r == '-' || unicode.IsDigit(r) || unicode.IsMark(r) || unicode.Is(unicode.Pc, r))
		if !ok {
			break
		}
		j += size
	}
	if j == start {
		return nil, 0
	}
	marker = b[start:j]
	if j < len(b) && b[j] == '\r' {
		j++
	}
	if j >= len(b) || b[j] != '\n' {
		return nil, 0
	}
	return marker, j + 1
}

// startsToken reports whether the byte at i starts a token as counted:
// every byte but blanks and the second and later letters, digits and
// underscores of a word (a letter after a digit counted again). Operators of two bytes, a name's dashes and
// non-ASCII characters (each byte, unless the scanner steps over a
// character whole) are counted more than HCL's scanner would.
func startsToken(src []byte, i int) bool {
	c := src[i]
	switch {
	case c == ' ' || c == '\t':
		return false
	case c == '\r': // a newline's, or a token on its own
		return i+1 == len(src) || src[i+1] != '\n'
	case alnum(c) && i > 0 && alnum(src[i-1]) && !(isDigit(src[i-1]) && !isDigit(c)):
		// A letter after a digit may start a name after a number (0A).
		return false
	}
	return true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func alnum(c byte) bool {
	return c == '_' || isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func identByte(c byte) bool { return c == '-' || alnum(c) }

// scanJSON scans HCL's JSON syntax (objects and arrays nest, and a
// string is a template, which HCL parses when the value is read) to the
// first line where the nesting
// passes maxDepth or the tokens maxTokens (tooMany); line 0 when neither
// does. A token is a punctuation byte, a string, a word (number, true,
// false, null), and the tokens of a string's template.
func scanJSON(src []byte, maxDepth, maxTokens int) (line int, tooMany bool) {
	depth, tokens := 0, 0
	line = 1
	var open []byte
	for i := 0; i < len(src); i++ {
		c := src[i]
		if c != '\n' && startsToken(src, i) {
			if tokens++; tokens > maxTokens {
				return line, true
			}
		}
		switch c {
		case '\n':
			line++
		case '{', '[':
			open = append(open, c)
			depth++
			if depth > maxDepth {
				return line, false
			}
		case '}', ']':
			if len(open) > 0 && open[len(open)-1] == c-2 { // '{' is '}'-2, '[' is ']'-2
				open = open[:len(open)-1]
				depth--
			}
		case '"':
			start, startLine := i+1, line
			for i++; i < len(src) && src[i] != '"'; i++ {
				switch src[i] {
				case '\\':
					i++
				case '\n':
					line++
				}
			}
			raw := src[start-1 : min(i+1, len(src))]
			// HCL parses a JSON string as a template when it is evaluated,
			// and its scanner ends the text at each $, % and newline.
			if !bytes.ContainsAny(raw, `$%\`) {
				continue
			}
			var str string
			if json.Unmarshal(raw, &str) != nil {
				continue // a syntax error, which the parser reports
			}
			ts := scanTemplate([]byte(str), depth, startLine, maxDepth, maxTokens-tokens)
			if ts.err != 0 {
				return ts.err, ts.tooMany
			}
			tokens += ts.tokens
		}
	}
	return 0, false
}

// tokensDiagnostic is the error for a file of more than MaxTokens
// tokens, found at line.
func tokensDiagnostic(path string, line int) *hcl.Diagnostic {
	return refusal(path, hcl.Pos{Line: line, Column: 1}, "Too many tokens",
		fmt.Sprintf("more than %d tokens by here; the file is not parsed", MaxTokens))
}

// depthDiagnostic is the error for a file nested deeper than MaxDepth,
// found at line.
func depthDiagnostic(path string, line int) *hcl.Diagnostic {
	return refusal(path, hcl.Pos{Line: line, Column: 1}, "Nesting too deep",
		fmt.Sprintf("more than %d levels of brackets, braces, strings, templates or operators nest here; the file is not parsed", MaxDepth))
}

// refusal is the error of a file at path refused unparsed, at pos.
func refusal(path string, pos hcl.Pos, summary, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   detail,
		Subject:  &hcl.Range{Filename: path, Start: pos, End: pos},
	}
}
