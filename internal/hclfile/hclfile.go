// Package hclfile reads the project's HCL files (the configuration file,
// credentials, module source credentials, sync manifests, pins, and the
// .tf files of the modules sync fetches): HCL native syntax, or HCL's
// JSON syntax when the file's name ends in ".json". It parses only: what
// the blocks mean is decoded by each file's reader, which may use Suggest
// and UnknownName for the names it does not know. Every file is read up
// to MaxBytes, then checked in one pass before it is parsed: a file that
// is not UTF-8, one nested deeper than MaxDepth (which HCL's recursive
// parsers would turn into a crash) and one of more than MaxTokens tokens
// (each a struct of HCL's scanner and often a node of its tree) are
// refused with their file:line unparsed. Attributes are evaluated
// through Value, which reads literal values only.
package hclfile

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"

	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
)

// MaxBytes is the largest file Parse reads: sixteen times the
// largest real configuration, and as many bytes as MaxTokens allows of
// long strings and comments.
const MaxBytes = 16 << 20

// Parse reads and parses the file at path with p (a new parser when nil),
// as JSON when its name ends in ".json" in any case. err is the error
// reading it; diags are the syntax errors, or the one error of a file
// larger than MaxBytes, of more than MaxTokens tokens or nested deeper
// than MaxDepth, which is not parsed.
//
// The file is opened as every operator's file is
// (internal/inputfile.OpenOperator): through a link, but never waiting,
// and what the name leads to when it is opened is checked on the
// descriptor and read. A FIFO, a device, a socket or a directory at path
// is an *inputfile.KindError naming it: opening a FIFO waits for a writer
// for ever (a serve that reads credentials from one would never start, a
// reload never end), and a device never ends. Standard input, where a
// command takes it, is read with ParseFrom.
func Parse(p *hclparse.Parser, path string) (f *hcl.File, diags hcl.Diagnostics, err error) {
	fh, _, err := inputfile.OpenOperator(path)
	if err != nil {
		return nil, nil, err
	}
	defer fh.Close()
	return ParseFrom(p, path, fh)
}

// ParseTrusted is Parse of a file of secrets (the origin credentials, the
// module source credentials): opened by internal/inputfile.OpenTrusted, it
// is refused, as an *inputfile.WritableError naming it, when users other
// than its owner may write it, and as an *inputfile.OwnerError when a
// user other than root and the process's owns it.
func ParseTrusted(p *hclparse.Parser, path string) (f *hcl.File, diags hcl.Diagnostics, err error) {
	fh, _, err := inputfile.OpenTrusted(path)
	if err != nil {
		return nil, nil, err
	}
	defer fh.Close()
	return ParseFrom(p, path, fh)
}

// ParseFrom is Parse of the file at path that its caller opened as r (and
// checked: an operator's file that a reload reads again is opened by
// internal/inputfile.OpenOperator, and read from the very descriptor it
// checked), or of standard input, named path in diagnostics: r is read
// up to MaxBytes, whatever it is.
func ParseFrom(p *hclparse.Parser, path string, r io.Reader) (f *hcl.File, diags hcl.Diagnostics, err error) {
	src, err := readBounded(r)
	if err != nil {
		return nil, nil, err
	}
	if src == nil {
		return nil, hcl.Diagnostics{refusal(path, hcl.Pos{Line: 1, Column: 1}, "File too large",
			fmt.Sprintf("larger than %d bytes; the file is not parsed", MaxBytes))}, nil
	}
	if p == nil {
		p = hclparse.NewParser()
	}
	isJSON := strings.EqualFold(filepath.Ext(path), ".json")
	if isJSON {
		// A UTF-8 byte order mark, as some editors begin a file with, is
		// no JSON: HCL's native syntax reads past it, and so is it read
		// here, not refused as an invalid start of a value.
		src = bytes.TrimPrefix(src, []byte("\ufeff"))
	}
	if d := checkBounds(src, path, isJSON); d != nil {
		return nil, hcl.Diagnostics{d}, nil
	}
	if isJSON {
		f, diags = p.ParseJSON(src, path)
	} else {
		f, diags = p.ParseHCL(src, path)
	}
	return f, diags, nil
}

// readBounded reads r, or nil when it holds more than MaxBytes (read no
// further), whatever it says its size is (a pipe, a device, a file still
// growing).
func readBounded(r io.Reader) ([]byte, error) {
	src, err := io.ReadAll(io.LimitReader(r, MaxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(src) > MaxBytes {
		return nil, nil
	}
	if src == nil {
		src = []byte{}
	}
	return src, nil
}

// checkBounds is the error for src, the file at path in HCL native syntax
// or (isJSON) HCL's JSON syntax, when it is not UTF-8, nests deeper than
// MaxDepth or holds more than MaxTokens tokens: its subject is the line
// where it does. nil when it does not.
func checkBounds(src []byte, path string, isJSON bool) *hcl.Diagnostic {
	if !utf8.Valid(src) {
		// HCL refuses such a file too, but only once it has scanned it,
		// reading a bad byte with what follows ("\xda#" starts a name,
		// not a comment): the checks below follow its scanner on UTF-8.
		return invalidDiagnostic(path, src)
	}
	var line int
	var tooMany bool
	if isJSON {
		line, tooMany = scanJSON(src, MaxDepth, MaxTokens)
	} else {
		s := scanNative(src, MaxDepth, MaxTokens)
		line, tooMany = s.err, s.tooMany
	}
	switch {
	case line == 0:
		return nil
	case tooMany:
		return tokensDiagnostic(path, line)
	}
	return depthDiagnostic(path, line)
}

// Summary is diags as "RANGE: SUMMARY; ...", without the details hcl
// adds: an error about a file that holds secrets quotes none of it.
func Summary(diags hcl.Diagnostics) string {
	var out []string
	for _, d := range diags {
		s := d.Summary
		if d.Subject != nil {
			s = d.Subject.String() + ": " + s
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}

// invalidDiagnostic is the error for src, the file at path, which is not
// UTF-8: its subject is the first bad byte.
func invalidDiagnostic(path string, src []byte) *hcl.Diagnostic {
	i := 0
	for i < len(src) {
		r, n := utf8.DecodeRune(src[i:])
		if r == utf8.RuneError && n == 1 {
			break
		}
		i += n
	}
	line := 1 + bytes.Count(src[:i], []byte("\n"))
	col := i - bytes.LastIndexByte(src[:i], '\n')
	return refusal(path, hcl.Pos{Line: line, Column: col, Byte: i}, "Invalid UTF-8", "the file must be UTF-8; it is not parsed")
}
