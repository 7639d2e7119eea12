package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// manifestDocRows returns the attribute rows of the table in
// docs/air-gap.md's "Manifest format" section: "in" column (a block type,
// or "top level") to the attributes it lists.
func manifestDocRows(t *testing.T) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "docs", "air-gap.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Manifest format\n")
	if !ok {
		t.Fatal(`docs/air-gap.md has no section "## Manifest format"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	rows := map[string][]string{}
	for line := range strings.Lines(section) {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(line), "|") {
			continue
		}
		in := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if strings.Contains(in, `"`) {
			in, _, _ = strings.Cut(in, " ") // `provider "ADDRESS"` is a provider block's row
		}
		rows[in] = append(rows[in], strings.Trim(strings.TrimSpace(cells[2]), "`"))
	}
	return rows
}

// docs/air-gap.md's table of the manifest format, the one the other guides
// link to for sync manifests and pins files, has a row for every block and
// attribute a manifest may hold, so that what the parser takes is what a
// reader of the format finds there.
func TestManifestFormatDocumented(t *testing.T) {
	rows := manifestDocRows(t)
	check := func(in string, schema *hcl.BodySchema) {
		for _, a := range schema.Attributes {
			found := false
			for _, got := range rows[in] {
				found = found || got == a.Name
			}
			if !found {
				t.Errorf("docs/air-gap.md, Manifest format: no row for %q in %s (it has %q)", a.Name, in, rows[in])
			}
		}
	}
	check("top level", &hcl.BodySchema{Attributes: manifestSchema.Attributes})
	bodies := map[string]*hcl.BodySchema{"provider": manifestProviderSchema, "module": manifestModuleSchema, "cli": manifestProviderSchema}
	for _, b := range manifestSchema.Blocks {
		schema, ok := bodies[b.Type]
		if !ok {
			t.Errorf("manifest block %q: this test does not know its attributes", b.Type)
			continue
		}
		check(b.Type, schema)
	}
	if len(bodies) != len(manifestSchema.Blocks) {
		t.Errorf("this test knows %d block types, a manifest has %d", len(bodies), len(manifestSchema.Blocks))
	}
}
