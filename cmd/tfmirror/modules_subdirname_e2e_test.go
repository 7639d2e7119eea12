package main

import (
	"os/exec"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// A //SUBDIR whose name a URL escapes (a space, a letter outside ASCII)
// installs through the mirror as it does directly: Terraform reads a
// relative download location as a URL, and the subdirectory of the
// location it makes of it as it is written.
func TestTerraformModuleSubdirNamesAURLEscapes(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip(err)
	}
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{})
	o := e.origin
	if _, err := o.AddGitRepo("names", map[string][]byte{
		"modules/my app/main.tf": []byte("output \"from\" {\n  value = \"space\"\n}\n"),
		"modules/módulo/main.tf": []byte("output \"from\" {\n  value = \"accent\"\n}\n"),
	}, "v1.0.0"); err != nil {
		t.Fatal(err)
	}
	o.AddModule("acme", "space", "aws", "1.0.0", "git::"+o.GitURL("names")+"//modules/my app?ref=v1.0.0")
	o.AddModule("acme", "accent", "aws", "1.0.0", "git::"+o.GitURL("names")+"//modules/módulo?ref=v1.0.0")
	root := "module \"space\" {\n  source  = \"acme/space/aws\"\n  version = \"1.0.0\"\n}\n" +
		"module \"accent\" {\n  source  = \"acme/accent/aws\"\n  version = \"1.0.0\"\n}\n"

	dir, _ := directModules(t, e).initRoot(t, root)
	want := moduleTree(t, dir)
	dir, _ = mirrorModules(t, e).initRoot(t, root)
	checkSameModules(t, "through the mirror", want, moduleTree(t, dir))
}
