package hclfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// A file is read as HCL or, by its name, as JSON, either begun with a
// UTF-8 byte order mark as some editors write one or not, and a syntax
// error's summary names the place but quotes nothing of the file.
func TestParse(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	schema := &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "token", Required: true}}}
	for _, path := range []string{
		write("creds.hcl", `token = "s3cr3t"`),
		write("creds.JSON", `{"token": "s3cr3t"}`),
		write("bom.hcl", "\ufeff"+`token = "s3cr3t"`),
		write("bom.json", "\ufeff"+`{"token": "s3cr3t"}`),
	} {
		f, diags, err := Parse(nil, path)
		if err != nil || diags.HasErrors() {
			t.Fatalf("%s: %v %v", path, err, diags)
		}
		content, diags := f.Body.Content(schema)
		if diags.HasErrors() {
			t.Fatalf("%s: %v", path, diags)
		}
		if v, _ := content.Attributes["token"].Expr.Value(nil); v.AsString() != "s3cr3t" {
			t.Errorf("%s: token %#v", path, v)
		}
	}
	_, diags, err := Parse(nil, write("bad.json", `{"token": "s3cr3t",,}`))
	if err != nil || !diags.HasErrors() {
		t.Fatalf("a JSON syntax error is not reported: %v %v", err, diags)
	}
	msg := Summary(diags)
	if !strings.Contains(msg, "bad.json:1,") || strings.Contains(msg, "s3cr3t") {
		t.Errorf("summary %q: want the place and none of the file", msg)
	}
	if _, _, err := Parse(nil, filepath.Join(dir, "missing.hcl")); !os.IsNotExist(err) {
		t.Errorf("a missing file: %v", err)
	}
}

// A suggestion is near enough to be meant, or none.
func TestSuggest(t *testing.T) {
	names := []string{"policy", "allowed_origins", "versions_ttl", "minimum_release_age", "deny"}
	for in, want := range map[string]string{
		"policies":        "policy",
		"allowed_origin":  "allowed_origins",
		"alowed_origins":  "allowed_origins",
		"min_release_age": "minimum_release_age",
		"version_ttl":     "versions_ttl",
		"denied":          "",
		"cache_max_bytes": "",
		"x":               "",
	} {
		if got := Suggest(in, names); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", in, got, want)
		}
	}
}
