// Package hclfile reads the project's HCL files (credentials, module
// source credentials, sync manifests): HCL native syntax, or HCL's JSON
// syntax when the file's name ends in ".json". It parses only: what the
// blocks mean is decoded by each file's reader.
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
// reading it; diags are the syntax errors.
func Parse(p *hclparse.Parser, path string) (f *hcl.File, diags hcl.Diagnostics, err error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	if p == nil {
		p = hclparse.NewParser()
	}
	if strings.EqualFold(filepath.Ext(path), ".json") {
		f, diags = p.ParseJSON(src, path)
	} else {
		f, diags = p.ParseHCL(src, path)
	}
	return f, diags, nil
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
