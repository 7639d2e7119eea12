package main

// End-to-end tests of the OCI front door's module repositories and of
// the OCI layout export with the real OpenTofu client: modules from
// oci:// sources install the files the host block installs, and an OCI
// registry filled from the export (the distribution registry, pushed to
// with oras) installs the same modules and providers. Gated by
// TFMIRROR_TOFU like the other OpenTofu tests; the registry and oras come
// from .ci/bin (package ocitest).

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/ocitest"
	"github.com/tfmirror/tfmirror/v2/oci"
)

// ociModuleRoot is moduleRoot's three modules from oci:// sources of
// registry REGISTRY (the monorepo module with its subdirectory, as the
// registry's download location gives it).
func ociModuleRoot(registry string) string {
	repo := registry + "/modules/" + tofuRegistry + "/acme/"
	return fmt.Sprintf(`module "vpc" {
  source = "oci://%[1]svpc/aws?tag=1.0.0"
}

module "app" {
  source = "oci://%[1]sapp/aws//modules/app?tag=2.1.0"
}

module "tarball" {
  source = "oci://%[1]starball/aws?tag=0.1.0"
}
`, repo)
}

// tofuInit runs tofu init in a new directory holding root as main.tf,
// with the CLI configuration conf and the CA certificates in caFile, and
// fails the test when it fails.
func tofuInit(t *testing.T, tofu, root, conf, caFile string) (dir, out string) {
	t.Helper()
	dir, out, err := tofuInitResult(t, tofu, root, conf, caFile)
	if err != nil {
		t.Fatalf("tofu init failed: %v\n%s", err, out)
	}
	return dir, out
}

// moduleFiles is moduleTree without modules.json, which names each
// module's source.
func moduleFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := moduleTree(t, dir)
	delete(files, "modules.json")
	return files
}

// writeTemp writes data to a new file named name and returns its path.
func writeTemp(t *testing.T, name, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// tofu init with the root module's modules from oci:// sources on the
// mirror installs the files the mirror's host block installs (the Git
// tag's, the monorepo's with its subdirectory, the tarball's); then the
// OCI layout export, pushed with oras into a distribution registry, has
// tofu install the same modules and the same providers (through
// oci_mirror) from that registry, the mirror stopped.
func TestTofuOCIModulesAndLayoutExport(t *testing.T) {
	t.Parallel()
	e := newTofuModulesE2E(t)
	tofu := e.tf
	hostRun := mirrorTofuModules(t, e, "")
	dir, _ := hostRun.init(t)
	want, wantLock := moduleFiles(t, dir), readLock(t, dir)
	if _, ok := want["app/modules/shared/main.tf"]; !ok || len(want) < 6 {
		t.Fatalf("the host block install is not what the test expects (set-up broken): %v", want)
	}

	mirrorHost := strings.TrimSuffix(strings.TrimPrefix(e.url, "https://"), "/")
	providersOnly := writeTemp(t, "cli.tfrc", fmt.Sprintf("provider_installation {\n  network_mirror {\n    url = %q\n  }\n}\n", e.url))
	dir, out := tofuInit(t, tofu, ociModuleRoot(mirrorHost), providersOnly, e.caFile)
	checkSameModules(t, "oci:// sources on the mirror", want, moduleFiles(t, dir))
	if !strings.Contains(out, "oci://") {
		t.Errorf("tofu did not say it installed from oci:// sources:\n%s", out)
	}

	// The export, pushed into a registry.
	layout := filepath.Join(t.TempDir(), "layout")
	res, err := e.mirror.admin.Export(context.Background(), admin.ExportRequest{Out: layout, Format: admin.FormatOCILayout})
	if err != nil || res.Layout == nil || res.Layout.Failed != 0 {
		t.Fatalf("export: %+v, %v", res, err)
	}
	reg := ocitest.StartRegistry(t)
	pushLayout(t, layout, reg)
	e.stop()

	both := writeTemp(t, "ca.pem", readText(t, e.caFile)+readText(t, reg.CA))
	viaRegistry := writeTemp(t, "cli.tfrc", fmt.Sprintf(
		"provider_installation {\n  oci_mirror {\n    repository_template = \"%s/providers/${hostname}/${namespace}/${type}\"\n    include = [%q]\n  }\n}\n",
		reg.Host(), tofuRegistry+"/*/*"))
	dir, _ = tofuInit(t, tofu, ociModuleRoot(reg.Host()), viaRegistry, both)
	checkSameModules(t, "oci:// sources on the registry filled from the export", want, moduleFiles(t, dir))
	if got := readLock(t, dir); !sameLockProviders(string(got), string(wantLock)) {
		t.Errorf("the providers installed from the registry differ:\n%s\nwant:\n%s", got, wantLock)
	}
}

// sameLockProviders reports whether two lock files name the same
// providers and versions and share a zh: hash for each (an install from
// an OCI mirror records the hashes of the platforms it saw).
func sameLockProviders(got, want string) bool {
	lines := func(s string) (names, hashes []string) {
		for line := range strings.SplitSeq(s, "\n") {
			line = strings.TrimSpace(line)
			switch {
			case strings.HasPrefix(line, "provider "), strings.HasPrefix(line, "version "):
				names = append(names, line)
			case strings.HasPrefix(line, `"zh:`):
				hashes = append(hashes, line)
			}
		}
		return names, hashes
	}
	gn, gh := lines(got)
	wn, wh := lines(want)
	if strings.Join(gn, "|") != strings.Join(wn, "|") || len(gh) == 0 {
		return false
	}
	for _, h := range gh {
		if !strings.Contains(strings.Join(wh, "|"), h) {
			return false
		}
	}
	return true
}

func readText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pushLayout runs the export's push.sh into reg, with oras from
// ocitest on PATH.
func pushLayout(t *testing.T, layout string, reg *ocitest.Server) {
	t.Helper()
	oras := ocitest.Oras.Binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", filepath.Join(layout, "push.sh"), reg.Host())
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(oras)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"SSL_CERT_FILE="+reg.CA, "DOCKER_CONFIG="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		script, _ := os.ReadFile(filepath.Join(layout, "push.sh"))
		t.Fatalf("push.sh: %v\n%s\nscript:\n%s", err, out, script)
	}
}

// tofuInitResult runs tofu init in a new directory holding root as
// main.tf, with the CLI configuration conf and the CA certificates in
// caFile, and returns its output and error.
func tofuInitResult(t *testing.T, tofu, root, conf, caFile string) (dir, out string, err error) {
	t.Helper()
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(root), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tofu, "init", "-no-color")
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TF_CLI_CONFIG_FILE=" + conf,
		"SSL_CERT_FILE=" + caFile, "GIT_SSL_CAINFO=/nonexistent",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
		"CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1", "TF_INPUT=0",
	}
	b, err := cmd.CombinedOutput()
	return dir, string(b), err
}

// A running tfmirror serves a module version to tofu init from an oci://
// source; a deny_version of it, applied by SIGHUP, has the next tofu init
// of that version fail with the policy's refusal and nothing installed,
// while the version beside it still installs.
func TestTofuOCIModuleDeniedAfterSIGHUP(t *testing.T) {
	t.Parallel()
	tofu := tofuBinary(t)
	bin := buildBinary(t)
	origin := newOrigin(t, fakeorigin.Options{})
	caFile := originCAFile(t, origin)
	for _, v := range []string{"1.0.0", "1.1.0"} {
		origin.AddTarball("vpc-"+v+".tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc " + v + "\n")}))
		origin.AddModule("acme", "vpc", "aws", v, origin.TarballURL("vpc-"+v+".tar.gz"))
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	config := filepath.Join(t.TempDir(), "tfmirror.hcl")
	if err := os.WriteFile(config, []byte("log_level = \"info\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := startProcess(t, bin, dataDir, origin, caFile, "--config", config)
	mirrorCA := filepath.Join(dataDir, "tls", "ca.pem")
	names, err := oci.NewNames("providers", "modules")
	if err != nil {
		t.Fatal(err)
	}
	vpc, err := addrs.ParseModule(origin.Addr + "/acme/vpc/aws")
	if err != nil {
		t.Fatal(err)
	}
	root := func(tag string) string {
		return fmt.Sprintf("module \"vpc\" {\n  source = \"oci://%s/%s?tag=%s\"\n}\n", m.addr, names.Module(vpc), tag)
	}
	conf := writeTemp(t, "cli.tfrc", "")
	installed := func(dir string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, ".terraform", "modules", "vpc", "main.tf"))
		if err != nil {
			return ""
		}
		return string(b)
	}

	dir, out, err := tofuInitResult(t, tofu, root("1.0.0"), conf, mirrorCA)
	if err != nil {
		t.Fatalf("tofu init before the deny: %v\n%s", err, out)
	}
	if got := installed(dir); got != "# vpc 1.0.0\n" {
		t.Fatalf("before the deny, vpc's main.tf is %q\n%s", got, out)
	}

	policy := `log_level = "info"
policy {
  deny_version "` + origin.Addr + `/acme/vpc/aws" {
    versions = "= 1.0.0"
    reason   = "CVE-2026-7777: use 1.1.0"
  }
}
`
	if err := os.WriteFile(config, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	m.waitLog("configuration file reloaded", 10*time.Second)

	dir, out, err = tofuInitResult(t, tofu, root("1.0.0"), conf, mirrorCA)
	if err == nil {
		t.Fatalf("tofu init of the denied version succeeded:\n%s", out)
	}
	if got := installed(dir); got != "" {
		t.Errorf("the denied version was installed: %q", got)
	}
	if !strings.Contains(out, "451") {
		t.Errorf("tofu's failure does not show the policy's refusal (451):\n%s", out)
	}
	dir, out, err = tofuInitResult(t, tofu, root("1.1.0"), conf, mirrorCA)
	if err != nil {
		t.Fatalf("tofu init of the allowed version: %v\n%s", err, out)
	}
	if got := installed(dir); got != "# vpc 1.1.0\n" {
		t.Errorf("the allowed version's main.tf is %q\n%s", got, out)
	}
}
