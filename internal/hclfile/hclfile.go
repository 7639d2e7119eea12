// Package hclfile reads the project's HCL files (the configuration file,
// credentials, module source credentials, sync manifests, pins, and the
// .tf files of the modules sync fetches): HCL native syntax, or HCL's
// JSON syntax when the file's name ends in ".json". It parses only: what
// the blocks mean is decoded by each file's reader, which may use Suggest
// and UnknownName for the names it does not know. Every file is first
// checked for nesting deeper than MaxDepth, which HCL's recursive parsers
// would turn into a crash, and refused with its file:line unparsed.
package hclfile

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
)

// Parse reads and parses the file at path with p (a new parser when nil),
// as JSON when its name ends in ".json" in any case. err is the error
// reading it; diags are the syntax errors, or the one error of a file
// nested deeper than MaxDepth, which is not parsed.
func Parse(p *hclparse.Parser, path string) (f *hcl.File, diags hcl.Diagnostics, err error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	if p == nil {
		p = hclparse.NewParser()
	}
	isJSON := strings.EqualFold(filepath.Ext(path), ".json")
	if d := checkDepth(src, path, isJSON); d != nil {
		return nil, hcl.Diagnostics{d}, nil
	}
	if isJSON {
		f, diags = p.ParseJSON(src, path)
	} else {
		f, diags = p.ParseHCL(src, path)
	}
	return f, diags, nil
}

// checkDepth is the error for src, the file at path in HCL native syntax
// or (isJSON) HCL's JSON syntax, when it nests deeper than MaxDepth: its
// subject is the line where it does. nil when it does not.
func checkDepth(src []byte, path string, isJSON bool) *hcl.Diagnostic {
	line := 0
	if isJSON {
		line = checkJSON(src, MaxDepth)
	} else {
		line = checkNative(src, MaxDepth)
	}
	if line == 0 {
		return nil
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
