package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
)

// TestSyncPrintsNoControlCharacters: what sync prints of a stranger's
// package (its file names, its configuration's strings, in a failure)
// reaches the operator's terminal with its control and format characters
// shown, not sent: a file named with an escape sequence (which sets the
// terminal's title, or its clipboard) is printed as \x1b... ; one named
// with a bidirectional override or isolate (which shows the text after it
// reversed, so that a failure reads as naming another file) or a
// zero-width joiner as \u202e... .
func TestSyncPrintsNoControlCharacters(t *testing.T) {
	const evil = "registry.terraform.io/acme/evil/aws"
	for _, tc := range []struct{ name, file, shown string }{
		{"escape sequences", "title\x1b]0;pwned\x07\x1b[2J.tf", `title\x1b]0;pwned\x07\x1b[2J.tf`},
		{"format characters", "bad\u202eft.niam\u2066\u200d.tf", `bad\u202eft.niam\u2066\u200d.tf`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops := &slowModuleOps{files: map[string]map[string]string{
				evil: {"main.tf": "# module\n", tc.file: "module \"y\" {\n"},
			}}
			dir := t.TempDir()
			spec := moduleSpec(t, dir, evil)
			var out, status bytes.Buffer
			r := &syncRun{cfg: syncConfig{Config: settings.Config{DataDir: dir}}, ops: ops, out: &out, status: &status, now: time.Now}
			r.cfg.ModuleTimeout = time.Minute
			if r.runProviders(context.Background(), spec) {
				t.Errorf("sync succeeded with a package that does not parse")
			}
			printed := out.String() + status.String()
			t.Logf("printed:\n%s", printed)
			if !strings.Contains(printed, tc.shown) {
				t.Errorf("the failure does not name the file as %s", tc.shown)
			}
			for _, c := range printed {
				if c != '\n' && unicode.IsControl(c) || unicode.Is(unicode.Cf, c) {
					t.Fatalf("sync printed the character %U", c)
				}
			}
		})
	}
}

// TestSyncListsUnmirrorableSourcesOfPackages: a module source that is not
// a registry address, called from inside a package sync fetched (not only
// from the configuration or manifest it was given), is listed as one the
// clients fetch themselves, as the documentation says: an air-gapped
// mirror cannot serve it, and the operator learns it from the sync, not
// from a failed terraform init behind the air gap.
func TestSyncListsUnmirrorableSourcesOfPackages(t *testing.T) {
	const m = "registry.terraform.io/acme/m/aws"
	ops := &slowModuleOps{files: map[string]map[string]string{
		m: {"main.tf": "module \"x\" {\n  source = \"git::https://git.example.test/x.git?ref=v1\"\n}\n"},
	}}
	dir := t.TempDir()
	spec := moduleSpec(t, dir, m)
	var out, status bytes.Buffer
	r := &syncRun{cfg: syncConfig{Config: settings.Config{DataDir: dir}}, ops: ops, out: &out, status: &status, now: time.Now}
	r.cfg.ModuleTimeout = time.Minute
	r.runProviders(context.Background(), spec)
	want := "not a registry module, fetched by the clients themselves (use a registry address to mirror it): module " + m + " 1.0.0: git::https://git.example.test/x.git?ref=v1"
	if !strings.Contains(status.String(), want) {
		t.Errorf("sync did not list the package's git:: source; printed:\n%s%s", out.String(), status.String())
	}
}
