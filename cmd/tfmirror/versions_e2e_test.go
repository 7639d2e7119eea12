package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// An origin listing a string the mirror does not serve as a module
// version, but that terraform reads as one ("0.2.0.0": hashicorp/go-version
// takes four parts), beside 0.1.0: terraform took 0.2.0.0 for the newest,
// asked the mirror for it and failed on the 400. The mirror's list leaves
// it out, so terraform init installs 0.1.0.
func TestTerraformModuleListLeavesOutNonVersions(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{})
	o := e.origin
	o.AddTarball("m.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("output \"from\" {\n  value = \"tarball\"\n}\n")}))
	for _, v := range []string{"0.1.0", "0.2.0.0"} {
		o.AddModule("acme", "tarball", "aws", v, o.TarballURL("m.tar.gz"))
	}
	r := mirrorModules(t, e)
	dir := t.TempDir()
	root := "module \"tarball\" {\n  source  = \"acme/tarball/aws\"\n  version = \">= 0.1.0\"\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(root), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.tf, "init", "-no-color")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TF_CLI_CONFIG_FILE=" + r.conf, "SSL_CERT_FILE=" + r.caFile,
		"CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1", "TF_INPUT=0"}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("terraform init through the mirror: %v\n%s", err, b)
	}
	b, err := os.ReadFile(filepath.Join(dir, ".terraform", "modules", "modules.json"))
	if err != nil {
		t.Fatal(err)
	}
	var mods struct {
		Modules []struct{ Key, Version string }
	}
	if err := json.Unmarshal(b, &mods); err != nil {
		t.Fatal(err)
	}
	for _, m := range mods.Modules {
		if m.Key == "tarball" && m.Version != "0.1.0" {
			t.Errorf("installed version %q, want 0.1.0", m.Version)
		}
	}
}

// A deny_version of "= 1.1.0" refuses the build 1.1.0+build the origin
// lists: terraform init with "~> 1.0" through the network mirror installs
// 1.0.0, where it installed the denied release under its build's name.
func TestTerraformDenyVersionEveryBuild(t *testing.T) {
	t.Parallel()
	e, _ := newPolicyE2E(t)
	e.origin.AddProvider("acme", "widget", []string{"1.0.0", "1.1.0+build"}, registryPlatforms())
	if err := os.WriteFile(e.config, []byte(policyConfig(`  deny_version "`+privateRegistry+`/acme/widget" {
    versions = "= 1.1.0"
    reason   = "`+cve+`"
  }
`)), 0o600); err != nil {
		t.Fatal(err)
	}
	e.startMirror(filepath.Join(t.TempDir(), "data"))
	e.cliConf = filepath.Join(t.TempDir(), "cli.tfrc")
	if err := os.WriteFile(e.cliConf, []byte(fmt.Sprintf("provider_installation {\n  network_mirror {\n    url = %q\n  }\n}\n", e.url)), 0o644); err != nil {
		t.Fatal(err)
	}
	widget := privateRegistry + "/acme/widget"
	dir := writeConfig(t, map[string]string{"widget": widget + "@~> 1.0"})
	if out, err := e.terraform(dir, "init", "-no-color"); err != nil {
		t.Fatalf("terraform init through the network mirror: %v\n%s", err, out)
	}
	if got := installed(t, dir, widget); strings.Join(got, ",") != "1.0.0" {
		t.Errorf("installed %v, want 1.0.0 (1.1.0+build is release 1.1.0, denied)", got)
	}
}

// An origin listing one version in two spellings, "v1.0.0" first, then
// "1.0.0" (a registry publishing from two Git tags), each with its own
// package: terraform asks a download in the canonical spelling whichever
// it picked from the list, and installs 1.0.0's package directly. Through
// the mirror it installed v1.0.0's, the spelling the mirror asked the
// origin in; it installs what a direct install does now.
func TestTerraformModuleListedInTwoSpellingsInstallsAsDirectly(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{})
	o := e.origin
	for file, from := range map[string]string{"tagged-v.tar.gz": "v1.0.0", "tagged.tar.gz": "1.0.0"} {
		o.AddTarball(file, fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("output \"from\" {\n  value = \"" + from + "\"\n}\n")}))
	}
	o.AddModule("acme", "tarball", "aws", "v1.0.0", o.TarballURL("tagged-v.tar.gz"))
	o.AddModule("acme", "tarball", "aws", "1.0.0", o.TarballURL("tagged.tar.gz"))
	root := "module \"tarball\" {\n  source  = \"acme/tarball/aws\"\n  version = \"1.0.0\"\n}\n"

	dir, _ := directModules(t, e).initRoot(t, root)
	want := moduleTree(t, dir)
	if !strings.Contains(want["tarball/main.tf"], `"1.0.0"`) {
		t.Fatalf("the direct install is not what the test expects (set-up broken): %v", want)
	}
	dir, _ = mirrorModules(t, e).initRoot(t, root)
	checkSameModules(t, "through the mirror", want, moduleTree(t, dir))
}
