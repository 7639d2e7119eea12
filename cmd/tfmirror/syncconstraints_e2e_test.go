package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// A configuration that needs and constrains providers the ways Terraform
// reads and sync did not (a provider block's deprecated version
// argument; a prerelease named exactly, another constraint admitting
// it; an ephemeral resource and a check block's data source; the module
// a test file's run block loads) is synced
// the providers and versions terraform init installs there: a sealed
// mirror on the synced data directory then lets terraform init the
// configuration with the origin down. Sync took the newest kubernetes
// (2.0.0), refused the prerelease ("no version matches") and left out
// random, http and null, and the init through the sealed mirror failed.
func TestSyncedConstraintsInitSealed(t *testing.T) {
	e := newE2E(t, fakeorigin.Options{})
	pls := registryPlatforms()
	e.origin.AddProvider("hashicorp", "kubernetes", []string{"1.10.0", "2.0.0"}, pls)
	e.origin.AddProvider("hashicorp", "widget", []string{"0.1.0", "0.2.0-beta1"}, pls)
	e.origin.AddProvider("hashicorp", "random", []string{"3.7.0"}, pls)
	e.origin.AddProvider("hashicorp", "http", []string{"3.5.0"}, pls)
	e.origin.AddProvider("hashicorp", "null", []string{"3.1.0", "3.2.0"}, pls)
	config := t.TempDir()
	main := `terraform {
  required_providers {
    widget = {
      source  = "hashicorp/widget"
      version = "0.2.0-beta1"
    }
  }
}
provider "kubernetes" {
  version = "~> 1.10.0"
}
module "local" {
  source = "./local"
}
ephemeral "random_password" "p" {
  length = 8
}
check "up" {
  data "http" "h" {
    url = "https://example.com"
  }
  assert {
    condition     = data.http.h.status_code == 200
    error_message = "down"
  }
}
`
	local := "terraform {\n  required_providers {\n    widget = {\n      source  = \"hashicorp/widget\"\n      version = \">= 0.1.0\"\n    }\n  }\n}\n"
	setup := "terraform {\n  required_providers {\n    null = {\n      source  = \"hashicorp/null\"\n      version = \"< 3.2.0\"\n    }\n  }\n}\n"
	test := "run \"setup\" {\n  module {\n    source = \"./testing/setup\"\n  }\n}\n"
	writeTree(t, config, map[string]string{"main.tf": main, "local/main.tf": local,
		"testing/setup/main.tf": setup, "tests/main.tftest.hcl": test})
	dataDir := filepath.Join(t.TempDir(), "synced")
	out, errOut, code := syncInProcess(t, e.origin, dataDir, "--platforms", strings.Join(pls, ","), config)
	if code != 0 {
		t.Fatalf("sync exited %d:\n%s\n%s", code, out, errOut)
	}
	e.origin.SetDown(http.StatusBadGateway)
	e.stop()
	e.startMirror(dataDir, "--offline")
	out, err := e.terraformWith(config, networkMirror(t, e.url), e.caFile, "init", "-no-color")
	if err != nil {
		t.Fatalf("terraform init through the sealed mirror: %v\n%s", err, out)
	}
	for _, want := range []string{"Installed hashicorp/kubernetes v1.10.0", "Installed hashicorp/widget v0.2.0-beta1",
		"Installed hashicorp/random v3.7.0", "Installed hashicorp/http v3.5.0", "Installed hashicorp/null v3.1.0"} {
		if !strings.Contains(out, want) {
			t.Errorf("terraform init did not say %q:\n%s", want, out)
		}
	}
}
