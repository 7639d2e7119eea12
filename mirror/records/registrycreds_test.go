package records

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// A module record's direct (or registry_credentials, which implies it, as
// the records of the release that first read the direct answer have it
// alone) says how its location reads: a package URL (OpenTofu's direct
// download answer), which need not name an archive format, and whose
// "//" is no //SUBDIR; without either (records of earlier releases too)
// the location is go-getter syntax, as before.
// Either way a record whose location today's reading does not give its
// kind and subdirectory is refused.
func TestModuleRecordRegistryCredentials(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		refused   bool
	}{
		{name: "package URL", doc: `{"schema":2,"module":"h/a/b/c","version":"1.0.0","location":"https://h/v1/pkg","registry_credentials":true,"kind":"archive","package":"https://h/v1/pkg"}`},
		{name: "package URL holding //", doc: `{"schema":2,"module":"h/a/b/c","version":"1.0.0","location":"https://h/p//sub.zip","registry_credentials":true,"kind":"archive","package":"https://h/p//sub.zip"}`},
		{name: "package URL, direct", doc: `{"schema":2,"module":"h/a/b/c","version":"1.0.0","location":"https://h/v1/pkg?sig=x","direct":true,"kind":"archive","package":"https://h/v1/pkg?sig=x"}`},
		{name: "package URL read as go-getter", doc: `{"schema":2,"module":"h/a/b/c","version":"1.0.0","location":"https://h/v1/pkg","kind":"archive","package":"https://h/v1/pkg"}`, refused: true},
		{name: "package URL of http", doc: `{"schema":2,"module":"h/a/b/c","version":"1.0.0","location":"http://h/v1/pkg","registry_credentials":true,"kind":"archive","package":"http://h/v1/pkg"}`, refused: true},
		{name: "earlier release's record", doc: `{"schema":2,"module":"h/a/b/c","version":"1.0.0","location":"https://h/x.tar.gz//sub","kind":"archive","package":"https://h/x.tar.gz?archive=tar.gz","subdir":"sub"}`},
	} {
		var rec ModuleRecord
		err := json.Unmarshal([]byte(tc.doc), &rec)
		if got := errors.Is(err, ErrModuleRecordRefused); got != tc.refused || (err != nil && !got) {
			t.Errorf("%s: %v, want refused %v", tc.name, err, tc.refused)
		}
	}
	out, err := json.Marshal(ModuleRecord{Schema: Schema, Location: "https://h/x.tar.gz", Kind: "archive"})
	if err != nil || strings.Contains(string(out), "registry_credentials") || strings.Contains(string(out), "direct") {
		t.Errorf("a record without the flag is written %s (%v): the field is left out, as earlier releases wrote it", out, err)
	}
}
