package proxy

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestStatusJSONFieldsDocumented keeps docs/operations.md's status page
// section complete: every field of the status page's JSON (Status, walked
// by reflection) has a row of the JSON table, and every field of the
// objects inside it is named in the section.
func TestStatusJSONFieldsDocumented(t *testing.T) {
	data, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	start := strings.Index(doc, "\n## Status page\n")
	if start < 0 {
		t.Fatal("docs/operations.md has no section ## Status page")
	}
	section := doc[start+1:]
	if end := strings.Index(section[1:], "\n## "); end >= 0 {
		section = section[:end+1]
	}
	// The first cells of the section's table rows.
	rows := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		for _, part := range strings.Split(cell, ",") {
			name := strings.Trim(strings.TrimSpace(part), "`")
			rows[strings.TrimSuffix(name, "[]")] = true
		}
	}
	named := func(name string) bool {
		return strings.Contains(section, "`"+name+"`") || strings.Contains(section, "`"+name+"[]`")
	}

	top := reflect.TypeFor[Status]()
	seen := map[reflect.Type]bool{}
	var walk func(typ reflect.Type, path string)
	walk = func(typ reflect.Type, path string) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || typ == reflect.TypeFor[time.Time]() || seen[typ] {
			return
		}
		seen[typ] = true
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			if f.Anonymous && name == "" {
				walk(f.Type, path)
				continue
			}
			if name == "" {
				name = f.Name
			}
			switch {
			case typ == top && !rows[name]:
				t.Errorf("docs/operations.md's status page JSON table has no row for %s", name)
			case typ != top && !named(name):
				t.Errorf("docs/operations.md's status page section does not name %s.%s", path, name)
			}
			walk(f.Type, strings.TrimPrefix(path+"."+name, "."))
		}
	}
	walk(top, "")
}
