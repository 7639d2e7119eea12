package settings

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// An error about a setting begins with its flag, and may name another
// in its advice (give the origin's token in --credentials-file): it is
// placed at the line of the setting it is about, even where the one
// advised is earlier in the file and the table, and a reload's error
// names that setting first.
func TestErrorPlacedAtTheSettingItBeginsWith(t *testing.T) {
	t.Parallel()
	const path = "tfmirror.hcl"
	l := &Loaded{File: &File{Path: path, values: map[string]string{"credentials-file": "/etc/tfmirror/credentials.tfrc", "releases-hashicorp-url": "https://releases.hashicorp.com/"},
		ranges: map[string]hcl.Range{"credentials-file": {Filename: path, Start: hcl.Pos{Line: 6}}, "releases-hashicorp-url": {Filename: path, Start: hcl.Pos{Line: 13}}}},
		Sources: map[string]Source{"credentials-file": FromFile, "releases-hashicorp-url": FromFile},
		order:   []*Setting{Named("credentials-file"), Named("releases-hashicorp-url")}}
	err := errors.New(`--releases-hashicorp-url: releases: "https://releases.hashicorp.com/" carries a user name or password: give the origin's token in --credentials-file instead`)
	d, _ := l.diagnostic(err)
	if d.Subject == nil || d.Subject.Start.Line != 13 {
		t.Errorf("placed at %v, want line 13 (releases_hashicorp_url)", d.Subject)
	}
	if got := l.Locate(err).Error(); !strings.Contains(got, "(configuration file: releases_hashicorp_url at ") {
		t.Errorf("Locate names another setting first: %s", got)
	}
	// One that begins with no flag keeps the table's order.
	d, _ = l.diagnostic(errors.New("both --credentials-file and --releases-hashicorp-url are wrong"))
	if d.Subject == nil || d.Subject.Start.Line != 6 {
		t.Errorf("placed at %v, want line 6 (credentials_file, first in the table)", d.Subject)
	}
}
