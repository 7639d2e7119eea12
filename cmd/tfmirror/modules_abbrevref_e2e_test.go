package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// A registry module whose Git location pins an abbreviated commit id
// (?ref=1a2b3c4), an old commit no branch or tag names, installs through
// the mirror as terraform installs it directly (go-getter clones the
// repository and checks the id out).
func TestTerraformModuleAbbreviatedCommitRef(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip(err)
	}
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{})
	o := e.origin
	old, err := o.AddGitRepo("pinned", map[string][]byte{
		"main.tf": []byte("output \"from\" {\n  value = \"old\"\n}\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.AddGitRepo("pinned", map[string][]byte{
		"main.tf": []byte("output \"from\" {\n  value = \"new\"\n}\n"),
	}, "v2.0.0"); err != nil {
		t.Fatal(err)
	}
	o.AddModule("acme", "pinned", "aws", "1.0.0", "git::"+o.GitURL("pinned")+"?ref="+old[:7])
	root := "module \"pinned\" {\n  source  = \"acme/pinned/aws\"\n  version = \"1.0.0\"\n}\n"

	dir, _ := directModules(t, e).initRoot(t, root)
	want := moduleTree(t, dir)
	if got := want["pinned/main.tf"]; !strings.Contains(got, `value = "old"`) {
		t.Fatalf("the direct install's main.tf is %q, not the pinned commit's (tree %v)", got, want)
	}
	dir, _ = mirrorModules(t, e).initRoot(t, root)
	checkSameModules(t, "through the mirror", want, moduleTree(t, dir))
}
