package main

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// requiresHashicorp is a configuration requiring hashicorp/NAME with
// constraint, its source naming no host.
func requiresHashicorp(name, constraint string) string {
	return fmt.Sprintf("terraform {\n  required_providers {\n    %s = {\n      source  = \"hashicorp/%s\"\n      version = %q\n    }\n  }\n}\n", name, name, constraint)
}

// syncForOpenTofuThenSeal syncs with --client opentofu and args (the
// configuration's directory last) from e's origin, answering as
// registry.opentofu.org, for every platform of registryPlatforms into a
// new data directory, then takes the origin down and restarts e's
// mirror sealed on that directory.
func syncForOpenTofuThenSeal(t *testing.T, e *e2e, args ...string) {
	t.Helper()
	dataDir := filepath.Join(t.TempDir(), "synced")
	args = append([]string{"--allowed-origins", tofuRegistry, "--client", "opentofu", "--platforms", strings.Join(registryPlatforms(), ",")}, args...)
	out, errOut, code := syncInProcess(t, e.origin, dataDir, args...)
	if code != 0 {
		t.Fatalf("sync --client opentofu exited %d:\n%s\n%s", code, out, errOut)
	}
	e.origin.SetDown(http.StatusBadGateway)
	e.stop()
	e.startMirror(dataDir, "--offline")
}

// sync --client opentofu syncs what `tofu init` installs for a
// configuration: its .tofu files read, each standing in for the .tf of
// its name, a registry module package's too, and an address naming no
// host, of a provider or a module, OpenTofu's registry's. A sealed
// mirror on the data directory then answers OpenTofu's requests for
// them. Sync had read every directory as Terraform does: what a
// versions.tofu asks, and anything of registry.opentofu.org, was never
// synced.
func TestSyncForOpenTofu(t *testing.T) {
	e := newE2E(t, fakeorigin.Options{})
	pls := registryPlatforms()
	e.origin.AddProvider("hashicorp", "widget", []string{"1.0.0", "1.1.0", "2.0.0"}, pls)
	e.origin.AddProvider("hashicorp", "gadget", []string{"3.0.0", "3.1.0"}, pls)
	e.origin.AddTarball("net-1.0.0.tar.gz", fakeorigin.TarGz(map[string][]byte{
		"versions.tf":   []byte(requiresHashicorp("gadget", ">= 3.0")),
		"versions.tofu": []byte(requiresHashicorp("gadget", "3.0.0")),
	}))
	e.origin.AddModule("acme", "net", "aws", "1.0.0", e.origin.TarballURL("net-1.0.0.tar.gz"))
	config := t.TempDir()
	writeTree(t, config, map[string]string{
		"versions.tf":   requiresHashicorp("widget", ">= 2.0"),
		"versions.tofu": requiresHashicorp("widget", "~> 1.0"),
		"main.tf":       "module \"net\" {\n  source  = \"acme/net/aws\"\n  version = \"1.0.0\"\n}\n",
	})
	syncForOpenTofuThenSeal(t, e, config)
	c := trustingClient(t, e.caFile)
	get := func(path string) (int, string) {
		resp, err := c.Get(e.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		path string
		code int
	}{
		{tofuRegistry + "/hashicorp/widget/1.1.0.json", 200}, // ~> 1.0, versions.tofu's
		{tofuRegistry + "/hashicorp/gadget/3.0.0.json", 200}, // the package's versions.tofu
		{"registry/" + tofuRegistry + "/v1/modules/acme/net/aws/1.0.0/download", 200},
	} {
		if code, body := get(tc.path); code != tc.code {
			t.Errorf("sealed mirror: GET %s: %d, want %d\n%s", tc.path, code, tc.code, body)
		}
	}
	for _, path := range []string{
		tofuRegistry + "/hashicorp/widget/2.0.0.json", // versions.tf's, which OpenTofu does not read
		tofuRegistry + "/hashicorp/gadget/3.1.0.json",
		tfRegistry + "/hashicorp/widget/1.1.0.json",
	} {
		if code, _ := get(path); code == 200 {
			t.Errorf("sealed mirror: GET %s: 200, which the sync for OpenTofu did not ask for", path)
		}
	}
}

// sync --client opentofu evaluates a module block's version from a
// variable, as tofu init does, its value from --var-file replacing
// terraform.tfvars's: the sealed mirror serves the version the value
// names and not the other. --var is refused without --client opentofu.
func TestSyncForOpenTofuWithVariables(t *testing.T) {
	e := newE2E(t, fakeorigin.Options{})
	for _, v := range []string{"1.0.0", "2.0.0"} {
		name := "net-" + v + ".tar.gz"
		e.origin.AddTarball(name, fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("output \"v\" {\n  value = \"" + v + "\"\n}\n")}))
		e.origin.AddModule("acme", "net", "aws", v, e.origin.TarballURL(name))
	}
	config := t.TempDir()
	writeTree(t, config, map[string]string{
		"main.tf":          "variable \"net_version\" {}\nmodule \"net\" {\n  source  = \"acme/net/aws\"\n  version = var.net_version\n}\n",
		"terraform.tfvars": "net_version = \"1.0.0\"\n",
		"prod.tfvars":      "net_version = \"2.0.0\"\n",
	})
	if _, err := parseSyncFlags([]string{"--var", "net_version=2.0.0", config}, func(string) (string, bool) { return "", false }, io.Discard); err == nil || !strings.Contains(err.Error(), "--var and --var-file are read with --client opentofu") {
		t.Errorf("--var without --client opentofu: %v, want refused", err)
	}
	if _, err := parseSyncFlags([]string{"--client", "opentofu", "--var-file", filepath.Join(config, "prd.tfvars"), config}, func(string) (string, bool) { return "", false }, io.Discard); err == nil || !strings.Contains(err.Error(), "prd.tfvars: no such file") {
		t.Errorf("--var-file naming no file: %v, want refused", err)
	}
	syncForOpenTofuThenSeal(t, e, "--var-file", filepath.Join(config, "prod.tfvars"), config)
	c := trustingClient(t, e.caFile)
	for v, synced := range map[string]bool{"2.0.0": true, "1.0.0": false} {
		resp, err := c.Get(e.url + "registry/" + tofuRegistry + "/v1/modules/acme/net/aws/" + v + "/download")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if (resp.StatusCode == http.StatusOK) != synced {
			t.Errorf("sealed mirror: module acme/net/aws %s: %d, synced: %v", v, resp.StatusCode, synced)
		}
	}
}

// The real tofu init installs, through a sealed mirror on a data
// directory that sync --client opentofu filled, what a configuration's
// .tofu files ask of a provider named without its host. Run with
// TFMIRROR_TOFU, as the other OpenTofu tests.
func TestTofuInitSealedAfterSyncForOpenTofu(t *testing.T) {
	e := newClientE2E(t, tofuBinary(t), fakeorigin.Options{SeparateDownloadHost: true, PackageHashes: true})
	pls := registryPlatforms()
	e.origin.AddProvider("hashicorp", "widget", []string{"1.0.0", "1.1.0", "2.0.0"}, pls)
	config := t.TempDir()
	writeTree(t, config, map[string]string{
		"versions.tf":   requiresHashicorp("widget", ">= 2.0"),
		"versions.tofu": requiresHashicorp("widget", "~> 1.0"),
	})
	syncForOpenTofuThenSeal(t, e, config)
	out, err := e.terraformWith(config, mirrorConf(t, e, ""), e.caFile, "init", "-no-color")
	if err != nil {
		t.Fatalf("tofu init through the sealed mirror: %v\n%s", err, out)
	}
	if !strings.Contains(out, "Installed hashicorp/widget v1.1.0") {
		t.Errorf("tofu init did not install widget 1.1.0, which versions.tofu asks:\n%s", out)
	}
}
