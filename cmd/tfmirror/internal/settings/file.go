package settings

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/tfmirror/tfmirror/v2/internal/duration"
	"github.com/tfmirror/tfmirror/v2/internal/hclfile"
	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// ConfigFlag is the flag that names the configuration file; its
// environment variable is EnvName(ConfigFlag), TFMIRROR_CONFIG. It is no
// setting of the table: the file cannot name another file.
const ConfigFlag = "config"

// PolicyBlock is the one block a configuration file may hold besides the
// settings' attributes: the package policy. The file reader does not
// interpret it; File.Policy hands its body to the policy's decoder.
const PolicyBlock = "policy"

// MaxFileBytes is the largest configuration file read.
const MaxFileBytes = 1 << 20

// Attribute is the name of s in the configuration file: its flag in
// snake case (cache-max-bytes is cache_max_bytes).
func (s *Setting) Attribute() string { return strings.ReplaceAll(s.Name, "-", "_") }

// AddConfigFlag registers --config on fs, bound to path.
func AddConfigFlag(fs *flag.FlagSet, path *string) {
	fs.StringVar(path, ConfigFlag, "", "configuration file (HCL, or JSON when its name ends in .json) whose attributes are settings named as the flags in snake case (cache_max_bytes); flags and TFMIRROR_ variables win over it")
}

// A File is a configuration file read and checked against Table: each
// attribute is a setting, named by Setting.Attribute, with a value of the
// setting's kind (a string in the flag's syntax, or the HCL type of the
// kind: a bool, a whole number of bytes or of an int, a list of strings),
// checked as the flag would check it; and at most one policy block.
type File struct {
	// Path is the file's name as given.
	Path string
	// Warnings are what the file is not refused for but an operator
	// should hear of.
	Warnings hcl.Diagnostics
	values   map[string]string // by setting name, in the flag's syntax
	ranges   map[string]hcl.Range
	refused  map[string]bool // settings whose value the file gives is refused
	policy   hcl.Body
}

// Value is the value the file gives setting name, in the flag's syntax,
// and where the file gives it.
func (f *File) Value(name string) (string, hcl.Range, bool) {
	if f == nil {
		return "", hcl.Range{}, false
	}
	v, ok := f.values[name]
	return v, f.ranges[name], ok
}

// Policy is the body of the file's policy block; nil when f is nil or
// has none.
func (f *File) Policy() hcl.Body {
	if f == nil {
		return nil
	}
	return f.policy
}

// ReadFile reads the configuration file at path: HCL native syntax, or
// JSON when its name ends in ".json". Every problem is a diagnostic, with
// the file and line where there is one: the file not read, bad syntax, an
// attribute that names no setting, a value of the wrong type or one the
// setting's flag refuses, a second policy block; with errors, f is nil
// when the file was not read or did not parse, and else holds what it
// accepted. Diagnostics never quote
// a secret setting's value. A file that users other than its owner may
// write (its group's or all users' write bit, on a file system mounted
// for writing), or that a user other than root and the process's owns,
// is refused before it is read, as every file whose content the mirror
// trusts is (internal/inputfile.OpenTrusted): whoever may write it
// decides what the mirror serves and trusts. A file on a read-only mount
// (a Kubernetes ConfigMap's) cannot be written whatever its mode.
func ReadFile(path string) (*File, hcl.Diagnostics) {
	f := &File{Path: path, values: map[string]string{}, ranges: map[string]hcl.Range{}, refused: map[string]bool{}}
	fail := func(summary, detail string) (*File, hcl.Diagnostics) {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: summary, Detail: detail}}
	}
	// What the name leads to when it is opened is checked and read: a
	// FIFO swapped in after a look at the name would hold a reload, and
	// every later one, for ever.
	// Whether others may write it, or own it, is checked as for every
	// file whose content the mirror trusts (inputfile.OpenTrusted).
	fh, fi, err := inputfile.OpenTrusted(path)
	var kind *inputfile.KindError
	var writable *inputfile.WritableError
	var owner *inputfile.OwnerError
	switch {
	case errors.As(err, &kind):
		return fail("Cannot read the configuration file", path+" is not a regular file ("+kind.Kind+")")
	case errors.As(err, &writable):
		return fail("Configuration file writable by others", err.Error())
	case errors.As(err, &owner):
		return fail("Configuration file owned by another user", err.Error())
	case err != nil:
		return fail("Cannot read the configuration file", err.Error())
	}
	defer fh.Close()
	if fi.Size() > MaxFileBytes {
		return fail("Configuration file too large", fmt.Sprintf("%s is %d bytes, at most %d are read", path, fi.Size(), MaxFileBytes))
	}
	hf, diags, err := hclfile.ParseFrom(nil, path, fh)
	if err != nil {
		return fail("Cannot read the configuration file", err.Error())
	}
	if diags.HasErrors() {
		return nil, withoutSecretDetails(hf, diags)
	}
	schema := &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: PolicyBlock}}}
	for _, s := range Table {
		schema.Attributes = append(schema.Attributes, hcl.AttributeSchema{Name: s.Attribute()})
	}
	content, diags := hf.Body.Content(schema)
	hint(diags)
	for i, b := range content.Blocks {
		if i > 0 {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate policy block",
				Detail:  "a configuration file holds at most one policy block; the first is at " + content.Blocks[0].DefRange.String(),
				Subject: b.DefRange.Ptr()})
			continue
		}
		f.policy = b.Body
	}
	for _, s := range Table {
		attr, ok := content.Attributes[s.Attribute()]
		if !ok {
			continue
		}
		v, err := f.decode(s, attr)
		if err != nil {
			detail := err.Error()
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError,
				Summary: "Invalid value for " + s.Attribute(), Detail: detail, Subject: attr.Expr.Range().Ptr()})
			f.refused[s.Name] = true
			continue
		}
		f.values[s.Name], f.ranges[s.Name] = v, attr.Expr.Range()
	}
	if diags.HasErrors() {
		return f, diags // what it accepted, for a check that reports all (Check)
	}
	f.Warnings = append(f.Warnings, diags...)
	return f, nil
}

// withoutSecretDetails drops the detail of each of diags, those of the
// file f that does not parse, whose place follows a secret setting's
// name anywhere on its line (or of each, when f's text is not known): the
// parser's detail quotes the text it could not read, part of a
// password. The summary and the place stay.
func withoutSecretDetails(f *hcl.File, diags hcl.Diagnostics) hcl.Diagnostics {
	var lines []string
	if f != nil {
		lines = strings.Split(string(f.Bytes), "\n")
	}
	secretBefore := func(p hcl.Pos) bool {
		if p.Line < 1 || p.Line > len(lines) {
			return true
		}
		line := lines[p.Line-1]
		if p.Column >= 1 && p.Column-1 <= len(line) {
			line = line[:p.Column-1]
		}
		for _, m := range attributeName.FindAllStringSubmatch(line, -1) {
			i := slices.IndexFunc(Table, func(s *Setting) bool { return s.Attribute() == m[1] })
			if i >= 0 && Table[i].Secret {
				return true
			}
		}
		return false
	}
	out := make(hcl.Diagnostics, 0, len(diags))
	for _, d := range diags {
		if d.Detail != "" && (d.Subject == nil || secretBefore(d.Subject.Start)) {
			c := *d
			c.Detail = "the detail is not shown: it may quote the value of a setting that holds a password"
			d = &c
		}
		out = append(out, d)
	}
	return out
}

// attributeName finds an attribute's name, as HCL (name =) or JSON
// ("name":) writes it before its value.
var attributeName = regexp.MustCompile(`"?([a-z][a-z0-9_]*)"?[ \t]*[=:]`)

// hint adds to the diagnostics of names the file's top level does not
// hold where they belong: inside the policy block for the policy's own
// (deny, deny_version), or the setting or block meant when one is near
// (policies for policy) and HCL suggested none.
func hint(diags hcl.Diagnostics) {
	for _, d := range diags {
		name, suggested := hclfile.UnknownName(d)
		if name == "" {
			continue
		}
		if slices.Contains(policy.Names(), name) {
			d.Detail += fmt.Sprintf(" %s is a rule of the package policy: it belongs inside policy { }, as policy { %s ... }.", name, name)
			continue
		}
		if suggested {
			continue
		}
		names := []string{PolicyBlock}
		for _, s := range Table {
			names = append(names, s.Attribute())
		}
		if s := hclfile.Suggest(name, names); s != "" {
			d.Detail += fmt.Sprintf(" Did you mean %q?", s)
		} else {
			d.Detail += " The settings are listed by tfmirror serve --help, and in docs/configuration.md."
		}
	}
}

// decode is attr's value for s in the flag's syntax, checked as the flag
// checks it.
func (f *File) decode(s *Setting, attr *hcl.Attribute) (string, error) {
	v, diags := hclfile.Value(attr.Expr)
	if diags.HasErrors() {
		// A variable or function: the file holds values only.
		return "", errors.New("want a literal value: " + diagSummary(diags))
	}
	str, err := flagSyntax(s.bind.kind, v)
	if err != nil {
		return "", err
	}
	fs := flag.NewFlagSet("file", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var scratch Config
	s.Register(fs, &scratch)
	if err := fs.Set(s.Name, str); err != nil {
		if s.Secret {
			return "", fmt.Errorf("not %s", wanted[s.bind.kind])
		}
		if strings.Contains(err.Error(), "want") {
			return "", fmt.Errorf("%q: %v", str, err)
		}
		return "", fmt.Errorf("%q: %v; want %s", str, err, wanted[s.bind.kind])
	}
	return str, nil
}

// wanted says what each kind of setting takes, for messages.
var wanted = map[string]string{
	"string":   "a string",
	"bool":     "true or false",
	"int":      "a whole number",
	"duration": duration.Want,
	"days":     duration.Want,
	"size":     `a size such as "10GiB" or "512MB", or a number of bytes`,
	"list":     `a list of strings, or one string of comma-separated items`,
}

// flagSyntax is v as the flag of a setting of kind would be given it:
// a string as it is, and the HCL type of the kind (a bool, a whole
// number, a list of strings) in the flag's syntax.
func flagSyntax(kind string, v cty.Value) (string, error) {
	if v.IsNull() {
		return "", fmt.Errorf("null; want %s (leave the attribute out for the default)", wanted[kind])
	}
	t := v.Type()
	switch {
	case t == cty.String:
		return v.AsString(), nil
	case t == cty.Bool && kind == "bool":
		return strconv.FormatBool(v.True()), nil
	case t == cty.Number && (kind == "int" || kind == "size"):
		bf := v.AsBigFloat()
		if !bf.IsInt() || bf.Sign() < 0 && kind == "size" {
			return "", fmt.Errorf("%s; want %s", bf.Text('g', -1), wanted[kind])
		}
		i, _ := bf.Int(nil)
		return i.String(), nil
	case kind == "list" && (t.IsListType() || t.IsTupleType() || t.IsSetType()):
		var items []string
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			if e.IsNull() || e.Type() != cty.String {
				return "", fmt.Errorf("an item is not a string; want %s", wanted[kind])
			}
			item := strings.TrimSpace(e.AsString())
			if item == "" || strings.Contains(item, ",") {
				return "", fmt.Errorf("item %q: items are not empty and hold no comma", item)
			}
			items = append(items, item)
		}
		return strings.Join(items, ","), nil
	}
	return "", fmt.Errorf("a %s; want %s", t.FriendlyName(), wanted[kind])
}

// diagSummary is diags' summaries, with where each is.
func diagSummary(diags hcl.Diagnostics) string {
	return hclfile.Summary(diags)
}

// FileError is a configuration file refused: every diagnostic, one a line.
type FileError struct {
	Path  string
	Diags hcl.Diagnostics
}

func (e *FileError) Error() string {
	return fmt.Sprintf("configuration file %s refused:%s", e.Path, e.Lines())
}

// Lines are the file's errors, each on a line of its own, indented,
// in the order of the file (what Error says after its first line).
func (e *FileError) Lines() string {
	var b strings.Builder
	diags := slices.Clone(e.Diags)
	slices.SortStableFunc(diags, func(a, b *hcl.Diagnostic) int {
		if a.Subject == nil || b.Subject == nil {
			return 0
		}
		return a.Subject.Start.Byte - b.Subject.Start.Byte
	})
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		b.WriteString("\n  ")
		b.WriteString(FormatDiagnostic(d))
	}
	return b.String()
}

// FormatDiagnostic is d as FILE:LINE,COLUMN: SUMMARY: DETAIL (the place
// left out when d has none).
func FormatDiagnostic(d *hcl.Diagnostic) string {
	s := d.Summary
	if d.Detail != "" {
		s += ": " + d.Detail
	}
	if d.Subject != nil {
		s = d.Subject.String() + ": " + s
	}
	return s
}
