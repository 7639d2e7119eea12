package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// A Git module whose files include links inside the package (a monorepo's
// modules sharing an outputs.tf) installs through the mirror with the
// files a direct install (a Git clone, which makes the links) gives.
//
// go-getter (v1.7, Terraform's and OpenTofu's) unpacks a tar link entry
// as an empty file, so the download answer names the package's zip, its
// links made copies, as the OCI door's layer is made.
func TestTerraformModuleLinksInstallAsDirectly(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip(err)
	}
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{})
	o := e.origin
	if _, err := o.AddGitTree("linked", fakeorigin.GitTree{
		Files: map[string][]byte{
			"common/outputs.tf":   []byte("output \"from\" {\n  value = \"linked\"\n}\n"),
			"modules/app/main.tf": []byte("# app\n"),
		},
		Links: map[string]string{
			"modules/app/outputs.tf": "../../common/outputs.tf",
		},
	}, "v1.0.0"); err != nil {
		t.Fatal(err)
	}
	o.AddModule("acme", "linked", "aws", "1.0.0", "git::"+o.GitURL("linked")+"//modules/app?ref=v1.0.0")
	root := "module \"linked\" {\n  source  = \"acme/linked/aws\"\n  version = \"1.0.0\"\n}\n\noutput \"from\" {\n  value = module.linked.from\n}\n"

	dir, _ := directModules(t, e).initRoot(t, root)
	want := moduleTree(t, dir)
	if got := want["linked/modules/app/outputs.tf"]; !strings.HasSuffix(got, " output \"from\" {\n  value = \"linked\"\n}\n") {
		t.Fatalf("the direct install does not follow the link (set-up broken): %v", want)
	}
	dir, _ = mirrorModules(t, e).initRoot(t, root)
	checkSameModules(t, "through the mirror", want, moduleTree(t, dir))
}
