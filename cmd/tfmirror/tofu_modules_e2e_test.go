package main

// End-to-end tests of registry modules through the registry front door
// with the real OpenTofu client: the root module of modules_e2e_test.go,
// whose registry modules OpenTofu looks up at registry.opentofu.org (its
// default registry), installed with only the mirror's host block in the
// CLI configuration. OpenTofu reads the download answer's JSON "location"
// on 200, where Terraform reads the X-Terraform-Get header. Gated by
// TFMIRROR_TOFU like the other OpenTofu tests.

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// newTofuModulesE2E is a mirror and fake origin with the modules of
// addModules, and OpenTofu as the client.
func newTofuModulesE2E(t *testing.T, extraFlags ...string) *e2e {
	t.Helper()
	tofu := tofuBinary(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip(err) // a direct install clones with git
	}
	e := newClientE2E(t, tofu, fakeorigin.Options{}, extraFlags...)
	addModules(t, e)
	return e
}

// directTofuModules is OpenTofu installing from the origin directly: a
// host block for registry.opentofu.org with the origin's own providers.v1
// and modules.v1.
func directTofuModules(t *testing.T, e *e2e) moduleRun {
	t.Helper()
	ca, err := e.origin.CAFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cli.tfrc")
	conf := fmt.Sprintf("host %q {\n  services = {\n    \"providers.v1\" = %q\n    \"modules.v1\" = %q\n  }\n}\n",
		tofuRegistry, e.origin.URL+"/v1/providers/", e.origin.URL+"/v1/modules/")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return moduleRun{registryRun{e: e, conf: path, caFile: ca}, ca}
}

// mirrorTofuModules is OpenTofu with only the host block the mirror's
// status page gives for registry.opentofu.org, and extra; git is not
// given the origin's CA, so that a clone that bypassed the mirror would
// fail.
func mirrorTofuModules(t *testing.T, e *e2e, extra string) moduleRun {
	t.Helper()
	r := throughMirrorAs(t, e, tofuRegistry, extra)
	conf, err := os.ReadFile(r.conf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(conf), `"modules.v1"   = "`+e.url+"registry/"+tofuRegistry+`/v1/modules/"`) {
		t.Fatalf("the status page's host block does not point modules.v1 at the mirror:\n%s", conf)
	}
	return moduleRun{r, "/nonexistent"}
}

// tofu init of a root module calling a module from a Git tag, one from a
// Git monorepo subdirectory (with a relative source inside it) and one
// from an HTTPS tarball installs through the mirror the module files and
// lock file of a direct install, and a second init takes nothing from the
// source hosts.
func TestTofuModulesThroughHostBlock(t *testing.T) {
	t.Parallel()
	e := newTofuModulesE2E(t)

	dir, wantOut := directTofuModules(t, e).init(t)
	want, wantLock := moduleTree(t, dir), readLock(t, dir)
	if _, ok := want["app/modules/shared/main.tf"]; !ok || len(want) < 7 {
		t.Fatalf("the direct install is not what the test expects (set-up broken): %v", want)
	}

	e.origin.ResetHits()
	mr := mirrorTofuModules(t, e, "")
	dir, out := mr.init(t)
	checkSameModules(t, "first init through the mirror", want, moduleTree(t, dir))
	checkSameInstall(t, "first init through the mirror", wantLock, readLock(t, dir), wantOut, out)
	if e.origin.Hits(fakeorigin.Git) == 0 || e.origin.Hits(fakeorigin.Tarball) != 1 {
		t.Errorf("first init: %d Git and %d tarball requests at the origin", e.origin.Hits(fakeorigin.Git), e.origin.Hits(fakeorigin.Tarball))
	}

	waitIdle(e.mirror.engine)
	e.origin.ResetHits()
	dir, out = mr.init(t)
	checkSameModules(t, "second init", want, moduleTree(t, dir))
	checkSameInstall(t, "second init", wantLock, readLock(t, dir), wantOut, out)
	if n := e.origin.Hits(fakeorigin.Git) + e.origin.Hits(fakeorigin.Tarball); n != 0 {
		t.Errorf("the second init made %d requests to the Git or tarball host", n)
	}
	if n := metric(t, e.mirror.registry, "tfmirror_http_requests_total", "route", "module_package", "code", "200"); n == 0 {
		t.Error("OpenTofu fetched no module package from the mirror")
	}
}

// With client authentication on, OpenTofu sends the token of the
// registry.opentofu.org credentials block to the download answer and
// fetches the package from the signed location it gives (with its query
// and, for the monorepo module, its //SUBDIR).
func TestTofuModulesWithClientAuth(t *testing.T) {
	t.Parallel()
	const token = "e2e-tofu-module-token.0123456789"
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newTofuModulesE2E(t, "--auth-tokens-file", tokens)
	dir, wantOut := directTofuModules(t, e).init(t)
	want, wantLock := moduleTree(t, dir), readLock(t, dir)

	creds := fmt.Sprintf("credentials %q {\n  token = %q\n}\n", tofuRegistry, token)
	dir, out := mirrorTofuModules(t, e, creds).init(t)
	checkSameModules(t, "with client authentication", want, moduleTree(t, dir))
	checkSameInstall(t, "with client authentication", wantLock, readLock(t, dir), wantOut, out)
	// OpenTofu sends HEAD, then GET, for each of the three packages.
	if n := metric(t, e.mirror.registry, "tfmirror_http_requests_total", "route", "module_package", "code", "200"); n != 6 {
		t.Errorf("the mirror answered %v module package requests with 200, want 6", n)
	}
}

// A registry that serves a module's package itself and answers its
// download in OpenTofu's direct form, {"location": URL,
// "use_registry_credentials": true}, with a package host that takes only
// the registry's token: tofu init through the mirror (which holds the
// token for the registry host in --credentials-file; the client sends
// none to the package host) installs the module files and lock file of a
// direct install with the token, and the package host saw the token from
// the mirror. With "use_registry_credentials": false the package URL
// (here a pre-signed one, without an archive extension) is fetched as it
// is, with no credential.
func TestTofuModuleDirectAnswerWithRegistryCredentials(t *testing.T) {
	t.Parallel()
	for _, use := range []bool{true, false} {
		t.Run(fmt.Sprint(use), func(t *testing.T) {
			t.Parallel()
			const token = "e2e-registry-token.0123456789abcdef"
			creds := fmt.Sprintf("credentials %q {\n  token = %q\n}\n", tofuRegistry, token)
			credsFile := filepath.Join(t.TempDir(), "credentials.tfrc")
			if err := os.WriteFile(credsFile, []byte(creds), 0o600); err != nil {
				t.Fatal(err)
			}
			e := newTofuModulesE2E(t, "--credentials-file", credsFile)
			o := e.origin
			// A package URL with no archive extension, as a registry
			// serving its own packages names them: OpenTofu tells the
			// format by the bytes.
			o.AddTarball("direct-pkg", fakeorigin.TarGz(map[string][]byte{
				"main.tf":    []byte("terraform {\n  required_providers {\n    random = {\n      source  = \"hashicorp/random\"\n      version = \"3.6.0\"\n    }\n  }\n}\n"),
				"outputs.tf": []byte("output \"from\" {\n  value = \"direct\"\n}\n"),
			}))
			location := o.TarballURL("direct-pkg")
			if use {
				o.RequireTarballToken("direct-pkg", token)
			} else {
				location += "?X-Amz-Expires=300&X-Amz-Signature=e2e-signature"
			}
			o.AddDirectModule("acme", "direct", "aws", "1.0.0", location, use)
			const root = "module \"direct\" {\n  source  = \"acme/direct/aws\"\n  version = \"1.0.0\"\n}\n"

			direct := directTofuModules(t, e)
			conf, err := os.ReadFile(direct.conf)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(direct.conf, append(conf, creds...), 0o644); err != nil {
				t.Fatal(err)
			}
			dir, wantOut := direct.initRoot(t, root)
			want, wantLock := moduleTree(t, dir), readLock(t, dir)
			if _, ok := want["direct/main.tf"]; !ok {
				t.Fatalf("the direct install is not what the test expects (set-up broken): %v", want)
			}

			o.ResetHits()
			before := len(o.TarballAuthSeen())
			dir, out := mirrorTofuModules(t, e, "").initRoot(t, root)
			checkSameModules(t, "through the mirror", want, moduleTree(t, dir))
			checkSameInstall(t, "through the mirror", wantLock, readLock(t, dir), wantOut, out)
			if o.Hits(fakeorigin.Tarball) != 1 {
				t.Errorf("the package host was asked %d times through the mirror, want 1", o.Hits(fakeorigin.Tarball))
			}
			seen := o.TarballAuthSeen()[before:]
			switch {
			case use && (len(seen) == 0 || seen[len(seen)-1] != "Bearer "+token):
				t.Errorf("the package host saw the Authorization headers %q; want the registry's token last, sent by the mirror", seen)
			case !use && len(seen) != 0:
				t.Errorf("the package host saw the Authorization headers %q through the mirror; want none", seen)
			}
		})
	}
}

// tofu init, through a sealed mirror on a data directory that sync
// --client opentofu filled from the root module, installs the module
// files and lock file of a direct install: sync looked the modules up
// at registry.opentofu.org, as OpenTofu does, and synced the providers
// their packages ask with the root module's.
func TestTofuModulesSealedAfterSyncForOpenTofu(t *testing.T) {
	tofuSealedAfterSync(t, moduleRoot)
}

// tofuSealedAfterSync checks that tofu init of root, through a mirror
// sealed on a data directory sync --client opentofu filled from root,
// installs the module files and lock file of a direct install.
func tofuSealedAfterSync(t *testing.T, root string) {
	t.Helper()
	e := newTofuModulesE2E(t)
	dir, wantOut := directTofuModules(t, e).initRoot(t, root)
	want, wantLock := moduleTree(t, dir), readLock(t, dir)

	config := t.TempDir()
	if err := os.WriteFile(filepath.Join(config, "main.tf"), []byte(root), 0o644); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(t.TempDir(), "synced")
	out, errOut, code := syncInProcess(t, e.origin, dataDir, "--allowed-origins", tofuRegistry, "--client", "opentofu",
		"--platforms", strings.Join(registryPlatforms(), ","), config)
	if code != 0 || !strings.Contains(out, "modules: 3 packages fetched") {
		t.Fatalf("sync --client opentofu exited %d:\n%s\n%s", code, out, errOut)
	}
	e.origin.SetDown(http.StatusBadGateway)
	e.stop()
	e.startMirror(dataDir, "--offline")
	dir, out = mirrorTofuModules(t, e, "").initRoot(t, root)
	checkSameModules(t, "sealed mirror after sync --client opentofu", want, moduleTree(t, dir))
	checkSameInstall(t, "sealed mirror after sync --client opentofu", wantLock, readLock(t, dir), wantOut, out)
}

// tofuStaticRoot is moduleRoot's three modules as OpenTofu lets a root
// module name them: sources and versions from variables and locals.
const tofuStaticRoot = `variable "team" {
  default = "Acme"
}

variable "app_major" {
  type    = number
  default = 2
}

variable "tarball_version" {
  type    = string
  default = null
}

locals {
  namespace = lower(var.team)
  app       = "${local.namespace}/app/aws"
}

module "vpc" {
  source  = "${local.namespace}/vpc/aws"
  version = "1.0.0"
}

module "app" {
  source  = local.app
  version = "~> ${var.app_major}.0"
}

module "tarball" {
  source  = format("%s/tarball/aws", local.namespace)
  version = coalesce(var.tarball_version, "0.1.0")
}
`

// tofu init, through a sealed mirror that sync --client opentofu filled
// from a root module whose module sources and versions refer to
// variables and locals, installs what a direct install does: sync
// evaluated them as OpenTofu does.
func TestTofuStaticModulesSealedAfterSyncForOpenTofu(t *testing.T) {
	tofuSealedAfterSync(t, tofuStaticRoot)
}
