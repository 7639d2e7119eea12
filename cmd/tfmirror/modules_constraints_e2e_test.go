package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// installedModules is what terraform init (or tofu init) recorded in dir
// of the modules it installed, as "KEY=VERSION" each.
func installedModules(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ".terraform", "modules", "modules.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Modules []struct{ Key, Version string }
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, x := range m.Modules {
		out = append(out, x.Key+"="+x.Version)
	}
	return strings.Join(out, ",")
}

// syncedAsDirect installs root directly from e's origin with direct, then
// syncs it (sync's flags args) into a data directory of its own, takes
// the origin down and installs root through a sealed mirror on that
// directory with sealed: the same module versions and the same lock
// file, or the test fails.
func syncedAsDirect(t *testing.T, e *e2e, root string, direct func() moduleRun, sealed func() moduleRun, args ...string) {
	t.Helper()
	dir, _ := direct().initRoot(t, root)
	want, wantLock := installedModules(t, dir), lockOf(t, dir)
	config := t.TempDir()
	if err := os.WriteFile(filepath.Join(config, "main.tf"), []byte(root), 0o644); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(t.TempDir(), "synced")
	if out, errOut, code := syncInProcess(t, e.origin, dataDir, append(append([]string{"--platforms", strings.Join(registryPlatforms(), ",")}, args...), config)...); code != 0 {
		t.Fatalf("sync: exit %d\n%s%s", code, out, errOut)
	}
	e.origin.SetDown(http.StatusBadGateway)
	e.stop()
	e.startMirror(dataDir, "--offline")
	dir, _ = sealed().initRoot(t, root)
	if got := installedModules(t, dir); got != want {
		t.Errorf("through the sealed mirror: installed %s, directly %s", got, want)
	}
	if got := lockOf(t, dir); got != wantLock {
		t.Errorf("through the sealed mirror, the lock file:\n%s\ndirectly:\n%s", got, wantLock)
	}
}

// lockOf is the lock file init wrote in dir ("" for none: a root of
// modules requiring no provider).
func lockOf(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ".terraform.lock.hcl"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// needsRandom is a module's configuration requiring hashicorp/random at
// version.
func needsRandom(version string) []byte {
	return fmt.Appendf(nil, "terraform {\n  required_providers {\n    random = {\n      source  = \"hashicorp/random\"\n      version = %q\n    }\n  }\n}\n", version)
}

// moduleConstraintOrigin puts acme/net/aws 1.5.0 (requiring random
// 3.5.0), 2.0.0 (random 3.6.0) and acme/meta/aws 1.0.0+build.5 at e's
// origin.
func moduleConstraintOrigin(e *e2e) {
	o := e.origin
	o.AddProvider("hashicorp", "random", []string{"3.5.0", "3.6.0"}, registryPlatforms())
	for v, random := range map[string]string{"1.5.0": "3.5.0", "2.0.0": "3.6.0"} {
		o.AddTarball("net-"+v+".tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": needsRandom(random)}))
		o.AddModule("acme", "net", "aws", v, o.TarballURL("net-"+v+".tar.gz"))
	}
	o.AddTarball("meta.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("output \"x\" {\n  value = 1\n}\n")}))
	o.AddModule("acme", "meta", "aws", "1.0.0+build.5", o.TarballURL("meta.tar.gz"))
}

// moduleConstraintRoots are module calls whose constraints the clients
// read by hashicorp/go-version's rules, not a provider's: "~> 1" is
// ">= 1" (2.0.0), "1.0.0" takes 1.0.0+build.5, and a null version is no
// constraint.
var moduleConstraintRoots = map[string]string{
	"tilde one":      "module \"net\" {\n  source  = \"acme/net/aws\"\n  version = \"~> 1\"\n}\n",
	"build metadata": "module \"meta\" {\n  source  = \"acme/meta/aws\"\n  version = \"1.0.0\"\n}\n",
	"null version":   "module \"net\" {\n  source  = \"acme/net/aws\"\n  version = null\n}\n",
}

// A module call's version constraint is read by sync as terraform init
// reads it (hashicorp/go-version), so that a sealed mirror installs the
// version, and locks the providers, a direct install does. Sync read it
// as a provider's: "~> 1" synced 1.5.0 alone, which the sealed init then
// installed where the direct one installed 2.0.0 (and locked random
// 3.5.0, not 3.6.0); "1.0.0" failed, no version matching it; a null
// version refused the directory.
func TestSyncReadsModuleConstraintsAsTerraform(t *testing.T) {
	for name, root := range moduleConstraintRoots {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newE2E(t, fakeorigin.Options{})
			moduleConstraintOrigin(e)
			syncedAsDirect(t, e, root, func() moduleRun { return directModules(t, e) }, func() moduleRun { return mirrorModules(t, e) })
		})
	}
}

// TestSyncReadsModuleConstraintsAsOpenTofu is
// TestSyncReadsModuleConstraintsAsTerraform with OpenTofu.
func TestSyncReadsModuleConstraintsAsOpenTofu(t *testing.T) {
	for name, root := range moduleConstraintRoots {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newClientE2E(t, tofuBinary(t), fakeorigin.Options{})
			moduleConstraintOrigin(e)
			syncedAsDirect(t, e, root, func() moduleRun { return directTofuModules(t, e) }, func() moduleRun { return mirrorTofuModules(t, e, "") },
				"--allowed-origins", tofuRegistry, "--client", "opentofu")
		})
	}
}

// Each version of a module is read at the subdirectories the calls
// selecting it use: a configuration calling acme/net/aws 1.0.0, and
// acme/net/aws//modules/x at 2.0.0, whose 1.0.0 has no modules/x and
// whose 2.0.0's root calls a module no registry has, is synced, and a
// sealed mirror installs it as a direct install does. Sync read every
// subdirectory of every version selected: it failed on 1.0.0 having no
// modules/x, and on the module 2.0.0's unused root calls; so did two
// directories making one call each, synced together.
func TestSyncReadsEachVersionAtItsCallsSubdirectories(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{})
	o := e.origin
	o.AddProvider("hashicorp", "random", []string{"3.5.0", "3.6.0"}, registryPlatforms())
	o.AddTarball("net-1.0.0.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("output \"v\" {\n  value = 1\n}\n")}))
	o.AddModule("acme", "net", "aws", "1.0.0", o.TarballURL("net-1.0.0.tar.gz"))
	o.AddTarball("net-2.0.0.tar.gz", fakeorigin.TarGz(map[string][]byte{
		"main.tf":           []byte("module \"ghost\" {\n  source  = \"acme/ghost/aws\"\n  version = \"9.9.9\"\n}\n"),
		"modules/x/main.tf": needsRandom("3.5.0"),
	}))
	o.AddModule("acme", "net", "aws", "2.0.0", o.TarballURL("net-2.0.0.tar.gz"))
	a := "module \"a\" {\n  source  = \"acme/net/aws\"\n  version = \"1.0.0\"\n}\n"
	b := "module \"b\" {\n  source  = \"acme/net/aws//modules/x\"\n  version = \"2.0.0\"\n}\n"

	dirA, dirB := t.TempDir(), t.TempDir()
	for dir, root := range map[string]string{dirA: a, dirB: b} {
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(root), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, errOut, code := syncInProcess(t, e.origin, filepath.Join(t.TempDir(), "two"), "--platforms", strings.Join(registryPlatforms(), ","), dirA, dirB); code != 0 {
		t.Errorf("sync of two directories: exit %d\n%s%s", code, out, errOut)
	}
	syncedAsDirect(t, e, a+b, func() moduleRun { return directModules(t, e) }, func() moduleRun { return mirrorModules(t, e) })
}
