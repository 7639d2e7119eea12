package main

// End-to-end tests of registry modules through the registry front door:
// the real terraform binary installs a root module's registry modules
// (from a Git tag, a Git monorepo subdirectory and an HTTPS tarball) with
// only the mirror's host block in its CLI configuration, and must install
// the same files as when it installs them from the origin directly.

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// moduleRoot is the root module of the tests: three registry modules,
// which between them need the provider hashicorp/random.
const moduleRoot = `module "vpc" {
  source  = "acme/vpc/aws"
  version = "1.0.0"
}

module "app" {
  source  = "acme/app/aws"
  version = "~> 2.0"
}

module "tarball" {
  source  = "acme/tarball/aws"
  version = "0.1.0"
}
`

// addModules puts the root module's modules at e's origin.
func addModules(t *testing.T, e *e2e) {
	t.Helper()
	o := e.origin
	o.AddProvider("hashicorp", "random", []string{"3.6.0"}, registryPlatforms())
	needsRandom := []byte("terraform {\n  required_providers {\n    random = {\n      source  = \"hashicorp/random\"\n      version = \"3.6.0\"\n    }\n  }\n}\n")
	if _, err := o.AddGitRepo("terraform-aws-vpc", map[string][]byte{
		"main.tf":      needsRandom,
		"outputs.tf":   []byte("output \"name\" {\n  value = \"vpc\"\n}\n"),
		"scripts/x.sh": []byte("#!/bin/sh\n"),
	}, "v1.0.0"); err != nil {
		t.Fatal(err)
	}
	if _, err := o.AddGitRepo("platform", map[string][]byte{
		"modules/app/main.tf":    []byte("module \"shared\" {\n  source = \"../shared\"\n}\n"),
		"modules/shared/main.tf": needsRandom,
		"README.md":              []byte("monorepo\n"),
	}, "v2.1.0"); err != nil {
		t.Fatal(err)
	}
	o.AddTarball("tarball-0.1.0.tar.gz", fakeorigin.TarGz(map[string][]byte{
		"main.tf": []byte("output \"from\" {\n  value = \"tarball\"\n}\n"),
	}))
	o.AddModule("acme", "vpc", "aws", "1.0.0", "git::"+o.GitURL("terraform-aws-vpc")+"?ref=v1.0.0")
	o.AddModule("acme", "app", "aws", "2.0.0", "git::"+o.GitURL("platform")+"//modules/app?ref=v2.1.0")
	o.AddModule("acme", "app", "aws", "2.1.0", "git::"+o.GitURL("platform")+"//modules/app?ref=v2.1.0")
	o.AddModule("acme", "tarball", "aws", "0.1.0", o.TarballURL("tarball-0.1.0.tar.gz"))
}

// moduleRun is terraform with a CLI configuration, trusting the fake
// origin's CA for Git too (a direct install clones with the git command).
type moduleRun struct {
	registryRun
	gitCA string
}

func (r moduleRun) init(t *testing.T) (dir, out string) {
	t.Helper()
	return r.initRoot(t, moduleRoot)
}

// directModules is terraform installing from the origin directly: a
// host block with the origin's own providers.v1 and modules.v1.
func directModules(t *testing.T, e *e2e) moduleRun {
	t.Helper()
	ca, err := e.origin.CAFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cli.tfrc")
	conf := fmt.Sprintf("host %q {\n  services = {\n    \"providers.v1\" = %q\n    \"modules.v1\" = %q\n  }\n}\n",
		tfRegistry, e.origin.URL+"/v1/providers/", e.origin.URL+"/v1/modules/")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return moduleRun{registryRun{e: e, conf: path, caFile: ca}, ca}
}

// mirrorModules is terraform with only the host block the mirror's status
// page gives; git is not given the origin's CA, so that a clone that
// bypassed the mirror would fail.
func mirrorModules(t *testing.T, e *e2e) moduleRun {
	t.Helper()
	r := throughMirrorAs(t, e, tfRegistry, "")
	conf, err := os.ReadFile(r.conf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(conf), `"modules.v1"   = "`+e.url+"registry/"+tfRegistry+`/v1/modules/"`) {
		t.Fatalf("the status page's host block does not point modules.v1 at the mirror:\n%s", conf)
	}
	return moduleRun{r, "/nonexistent"}
}

// moduleTree returns the files terraform installed under
// .terraform/modules, without Git's metadata, and modules.json.
func moduleTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	root := filepath.Join(dir, ".terraform", "modules")
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := os.Stat(p) // a link's target's mode, as its copy has
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = fmt.Sprintf("%s %s", info.Mode().Perm()&0o100, b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func checkSameModules(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	for name, w := range want {
		if g, ok := got[name]; !ok {
			t.Errorf("%s: %s not installed", what, name)
		} else if g != w {
			t.Errorf("%s: %s is %q, a direct install's %q", what, name, g, w)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: %s installed, not by a direct install", what, name)
		}
	}
}

// Not parallel: it reopens the cache of a mirror it stopped (see
// TestTerraformHostBlockOriginDownAndOffline).
func TestTerraformModulesThroughHostBlock(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip(err) // a direct install clones with git
	}
	e := newE2E(t, fakeorigin.Options{})
	addModules(t, e)

	dir, wantOut := directModules(t, e).init(t)
	want, wantLock := moduleTree(t, dir), readLock(t, dir)
	if _, ok := want["app/modules/shared/main.tf"]; !ok || len(want) < 7 {
		t.Fatalf("the direct install is not what the test expects (set-up broken): %v", want)
	}

	e.origin.ResetHits()
	mr := mirrorModules(t, e)
	dir, out := mr.init(t)
	checkSameModules(t, "first init through the mirror", want, moduleTree(t, dir))
	checkSameInstall(t, "first init through the mirror", wantLock, readLock(t, dir), wantOut, out)
	if e.origin.Hits(fakeorigin.Git) == 0 || e.origin.Hits(fakeorigin.Tarball) != 1 {
		t.Errorf("first init: %d Git and %d tarball requests at the origin", e.origin.Hits(fakeorigin.Git), e.origin.Hits(fakeorigin.Tarball))
	}

	// A second init in a fresh directory: nothing from the source hosts.
	waitIdle(e.mirror.engine)
	e.origin.ResetHits()
	dir, out = mr.init(t)
	checkSameModules(t, "second init", want, moduleTree(t, dir))
	checkSameInstall(t, "second init", wantLock, readLock(t, dir), wantOut, out)
	if n := e.origin.Hits(fakeorigin.Git) + e.origin.Hits(fakeorigin.Tarball); n != 0 {
		t.Errorf("the second init made %d requests to the Git or tarball host", n)
	}

	// The origin down: served from the cache.
	e.origin.SetDown(http.StatusBadGateway)
	dir, out = mr.init(t)
	checkSameModules(t, "origin down", want, moduleTree(t, dir))
	checkSameInstall(t, "origin down", wantLock, readLock(t, dir), wantOut, out)

	// The same cache, sealed: no request at all.
	e.stop()
	e.startMirror(e.dataDir, "--offline")
	e.origin.ResetHits()
	mr = mirrorModules(t, e)
	dir, out = mr.init(t)
	checkSameModules(t, "--offline", want, moduleTree(t, dir))
	checkSameInstall(t, "--offline", wantLock, readLock(t, dir), wantOut, out)
	if n := e.origin.TotalHits(); n != 0 {
		t.Errorf("the offline mirror made %d origin requests", n)
	}

	// The status page lists the cached module versions.
	resp, err := trustingClient(t, e.caFile).Get(e.url + "?format=json")
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	body.ReadFrom(resp.Body)
	resp.Body.Close()
	if !strings.Contains(body.String(), "registry.terraform.io/acme/vpc/aws") {
		t.Errorf("status page does not list the cached modules:\n%s", body.String())
	}
}

// With client authentication on, the download answer needs the token
// configured for the origin's host name, and the package location it
// gives carries a URL signature (the clients send no token there).
func TestTerraformModulesWithClientAuth(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip(err)
	}
	t.Parallel()
	const token = "e2e-module-token.0123456789"
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newE2E(t, fakeorigin.Options{}, "--auth-tokens-file", tokens)
	addModules(t, e)
	dir, wantOut := directModules(t, e).init(t)
	want, wantLock := moduleTree(t, dir), readLock(t, dir)

	mr := mirrorModules(t, e)
	creds := fmt.Sprintf("credentials %q {\n  token = %q\n}\n", tfRegistry, token)
	conf, err := os.ReadFile(mr.conf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mr.conf, append(conf, creds...), 0o644); err != nil {
		t.Fatal(err)
	}
	dir, out := mr.init(t)
	checkSameModules(t, "with client authentication", want, moduleTree(t, dir))
	checkSameInstall(t, "with client authentication", wantLock, readLock(t, dir), wantOut, out)
	// go-getter sends HEAD, then GET, for each of the three packages.
	if n := metric(t, e.mirror.registry, "tfmirror_http_requests_total", "route", "module_package", "code", "200"); n != 6 {
		t.Errorf("the mirror answered %v module package requests with 200, want 6", n)
	}
}

// Twenty clients asking the served mirror at once for the package of a
// module version it has not fetched: one Git fetch (the ref
// advertisement and one upload-pack), every client the same package.
func TestModulePackageConcurrentColdRequests(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip(err)
	}
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{})
	addModules(t, e)
	c := trustingClient(t, e.caFile)
	base := e.url + "registry/" + tfRegistry + "/v1/modules/acme/vpc/aws/1.0.0/"
	resp, err := c.Get(base + "download")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("X-Terraform-Get")
	if resp.StatusCode != http.StatusOK || loc != "./package.zip" {
		t.Fatalf("download answer: %d, X-Terraform-Get %q", resp.StatusCode, loc)
	}
	e.origin.ResetHits()
	var wg sync.WaitGroup
	bodies := make([][]byte, 20)
	for i := range bodies {
		wg.Go(func() {
			resp, err := c.Get(base + "package.zip")
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("client %d: status %d", i, resp.StatusCode)
			}
			bodies[i], _ = io.ReadAll(resp.Body)
		})
	}
	wg.Wait()
	for i, b := range bodies {
		if len(b) == 0 || !bytes.Equal(b, bodies[0]) {
			t.Errorf("client %d got %d bytes, client 0 %d", i, len(b), len(bodies[0]))
		}
	}
	if n := e.origin.Hits(fakeorigin.Git); n != 2 {
		t.Errorf("20 clients caused %d Git requests, want the 2 of one fetch", n)
	}
}

// tfmirror sync of a configuration that calls registry modules caches the
// modules, the modules they call and the providers they all require; a
// sealed mirror on that data directory then lets terraform init install
// the same module files and lock file as a direct install, with the
// origin down. Module sources that are not registry addresses are listed.
// Not parallel: it restarts the mirror on another data directory.
func TestSyncModulesThenInitOffline(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip(err)
	}
	e := newE2E(t, fakeorigin.Options{})
	addModules(t, e)
	dir, wantOut := directModules(t, e).init(t)
	want, wantLock := moduleTree(t, dir), readLock(t, dir)

	config := t.TempDir()
	root := moduleRoot + "module \"elsewhere\" {\n  source = \"git::https://git.example.test/x.git?ref=v1\"\n}\n"
	if err := os.WriteFile(filepath.Join(config, "main.tf"), []byte(root), 0o644); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(t.TempDir(), "synced")
	platforms := strings.Join(registryPlatforms(), ",")
	out, errOut, code := syncInProcess(t, e.origin, dataDir, "--platforms", platforms, config)
	if code != 0 {
		t.Fatalf("sync exited %d", code)
	}
	if !strings.Contains(out, "modules: 3 packages fetched, 0 already cached") {
		t.Errorf("sync output does not count the three modules:\n%s", out)
	}
	if !strings.Contains(errOut, "git::https://git.example.test/x.git?ref=v1") {
		t.Errorf("sync does not list the module it cannot mirror:\n%s", errOut)
	}
	// The root module must go: terraform would fetch the git source.
	if err := os.WriteFile(filepath.Join(config, "main.tf"), []byte(moduleRoot), 0o644); err != nil {
		t.Fatal(err)
	}

	// A second sync has nothing to fetch.
	e.origin.ResetHits()
	out, _, code = syncInProcess(t, e.origin, dataDir, "--platforms", platforms, config)
	if code != 0 || !strings.Contains(out, "modules: 0 packages fetched, 3 already cached") {
		t.Errorf("second sync (exit %d):\n%s", code, out)
	}
	if n := e.origin.Hits(fakeorigin.Git) + e.origin.Hits(fakeorigin.Tarball); n != 0 {
		t.Errorf("the second sync made %d requests to the Git or tarball host", n)
	}

	e.origin.SetDown(http.StatusBadGateway)
	e.stop()
	e.startMirror(dataDir, "--offline")
	dir, out = mirrorModules(t, e).init(t)
	checkSameModules(t, "sealed mirror after sync", want, moduleTree(t, dir))
	checkSameInstall(t, "sealed mirror after sync", wantLock, readLock(t, dir), wantOut, out)
}
