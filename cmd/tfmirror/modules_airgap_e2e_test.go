package main

// End-to-end tests of registry modules across an air gap, with the real
// terraform: sync a root module's registry modules into an empty data
// directory, export them, import the bundle into another one served
// sealed with the exporter's key trusted and the origin gone, and install
// the same module files and lock file as a direct install; and apply a
// root module whose registry modules have outputs only, with the same
// outputs through the mirror as from the origin.

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// The acceptance scenario of modules in an air gap: `tfmirror sync DIR`
// on the root module on an empty data directory, `export`, `import` into
// another empty data directory through `serve --offline
// --trusted-export-keys EXPORTER.asc`, the origin (registry, Git host and
// tarball host) stopped: terraform init writes the same module files and
// lock file as a direct install. Not parallel: it restarts the mirror.
func TestSyncExportImportModulesAirGap(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip(err) // a direct install clones with git
	}
	e := newE2E(t, fakeorigin.Options{})
	addModules(t, e)
	dir, wantOut := directModules(t, e).init(t)
	want, wantLock := moduleTree(t, dir), readLock(t, dir)

	// Connected side: sync the root module into an empty data directory,
	// export it.
	config := t.TempDir()
	if err := os.WriteFile(filepath.Join(config, "main.tf"), []byte(moduleRoot), 0o644); err != nil {
		t.Fatal(err)
	}
	connected := filepath.Join(t.TempDir(), "connected")
	out, errOut, code := syncInProcess(t, e.origin, connected, "--platforms", strings.Join(registryPlatforms(), ","), config)
	if code != 0 || !strings.Contains(out, "modules: 3 packages fetched, 0 already cached") {
		t.Fatalf("sync exited %d:\n%s%s", code, out, errOut)
	}
	bundle := filepath.Join(t.TempDir(), "bundle.tar.gz")
	code, out, errOut = runCommand("export", "--data-dir", connected, bundle)
	if code != 0 || !strings.Contains(out, "modules: 3 packages exported") {
		t.Fatalf("export exited %d:\n%s%s", code, out, errOut)
	}
	exporter := exporterKey(t, connected)

	// The gap: the origin, its Git host and its tarball host are gone.
	e.stop()
	e.origin.Close()

	// Sealed side: serve an empty data directory, sealed, trusting the
	// exporter's key; the import goes through it.
	sealed := filepath.Join(t.TempDir(), "sealed")
	e.startMirror(sealed, "--offline", "--trusted-export-keys", exporter)
	waitAdminSocket(t, sealed)
	code, out, errOut = runCommand("import", "--data-dir", sealed, bundle)
	if code != 0 || !strings.Contains(out, "modules: 3 packages imported") || !strings.Contains(out, "0 failed") ||
		!strings.Contains(errOut, "admin socket") {
		t.Fatalf("import through the sealed serve exited %d:\n%s%s", code, out, errOut)
	}
	dir, out = mirrorModules(t, e).init(t)
	checkSameModules(t, "sealed mirror after import", want, moduleTree(t, dir))
	checkSameInstall(t, "sealed mirror after import", wantLock, readLock(t, dir), wantOut, out)
}

// The same bundle with one module package changed is refused by the
// import, naming the module and the file; the module is not served.
func TestImportTamperedModuleRefused(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip(err)
	}
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{})
	addModules(t, e)
	config := t.TempDir()
	if err := os.WriteFile(filepath.Join(config, "main.tf"), []byte(moduleRoot), 0o644); err != nil {
		t.Fatal(err)
	}
	connected := filepath.Join(t.TempDir(), "connected")
	if out, errOut, code := syncInProcess(t, e.origin, connected, "--platforms", strings.Join(registryPlatforms(), ","), config); code != 0 {
		t.Fatalf("sync exited %d:\n%s%s", code, out, errOut)
	}
	export := filepath.Join(t.TempDir(), "export")
	if code, out, errOut := runCommand("export", "--data-dir", connected, export); code != 0 {
		t.Fatalf("export exited %d:\n%s%s", code, out, errOut)
	}
	pkg := filepath.Join("modules", tfRegistry, "acme", "vpc", "aws", "1.0.0.tar.gz")
	flipByte(filepath.Join(export, pkg))

	fresh := filepath.Join(t.TempDir(), "fresh")
	code, out, errOut := runCommand("import", "--data-dir", fresh, "--trusted-export-keys", exporterKey(t, connected), export)
	if code != 1 || !strings.Contains(out, "modules: 2 packages imported") {
		t.Errorf("import exited %d, want 1:\n%s%s", code, out, errOut)
	}
	for _, w := range []string{"module " + tfRegistry + "/acme/vpc/aws 1.0.0 refused", filepath.Join(export, pkg)} {
		if !strings.Contains(errOut, w) {
			t.Errorf("the import does not say %q:\n%s", w, errOut)
		}
	}
	e.stop()
	e.startMirror(fresh, "--offline")
	resp, err := trustingClient(t, e.caFile).Get(e.url + "registry/" + tfRegistry + "/v1/modules/acme/vpc/aws/versions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == 200 {
		t.Error("the sealed mirror lists the refused module's versions")
	}
}

// outputsRoot calls registry modules with outputs only (a Git tag, a Git
// monorepo subdirectory calling ../shared, an HTTPS tarball), so that
// terraform apply needs no provider.
const outputsRoot = `module "vpc" {
  source  = "acme/vpc/aws"
  version = "1.1.0"
}

module "app" {
  source  = "acme/app/aws"
  version = "3.0.0"
}

module "tarball" {
  source  = "acme/tarball/aws"
  version = "0.1.0"
}

output "vpc" {
  value = module.vpc.name
}

output "app" {
  value = module.app.greeting
}

output "tarball" {
  value = module.tarball.from
}
`

// addOutputModules adds to the modules of addModules versions of them
// with outputs only.
func addOutputModules(t *testing.T, e *e2e) {
	t.Helper()
	o := e.origin
	if _, err := o.AddGitRepo("terraform-aws-vpc", map[string][]byte{
		"outputs.tf": []byte("output \"name\" {\n  value = \"vpc ${path.module}\"\n}\n"),
	}, "v1.1.0"); err != nil {
		t.Fatal(err)
	}
	if _, err := o.AddGitRepo("platform", map[string][]byte{
		"modules/app/main.tf":    []byte("module \"shared\" {\n  source = \"../shared\"\n}\n\noutput \"greeting\" {\n  value = \"app and ${module.shared.greeting}\"\n}\n"),
		"modules/shared/main.tf": []byte("output \"greeting\" {\n  value = \"shared\"\n}\n"),
	}, "v3.0.0"); err != nil {
		t.Fatal(err)
	}
	o.AddModule("acme", "vpc", "aws", "1.1.0", "git::"+o.GitURL("terraform-aws-vpc")+"?ref=v1.1.0")
	o.AddModule("acme", "app", "aws", "3.0.0", "git::"+o.GitURL("platform")+"//modules/app?ref=v3.0.0")
}

// apply runs terraform init and apply (local state) of root in a fresh
// directory with r's CLI configuration, and returns the installed module
// files and `terraform output -json`.
func (r moduleRun) apply(t *testing.T, root string) (map[string]string, map[string]any) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(root), 0o644); err != nil {
		t.Fatal(err)
	}
	var outputs []byte
	for _, args := range [][]string{{"init", "-no-color"}, {"apply", "-auto-approve", "-no-color"}, {"output", "-json"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		cmd := exec.CommandContext(ctx, r.e.tf, args...)
		cmd.Dir = dir
		cmd.Env = []string{
			"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TF_CLI_CONFIG_FILE=" + r.conf,
			"SSL_CERT_FILE=" + r.caFile, "GIT_SSL_CAINFO=" + r.gitCA,
			"GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
			"CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1", "TF_INPUT=0",
		}
		b, err := cmd.Output()
		cancel()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("terraform %s failed: %v\n%s%s", args[0], err, b, stderr)
		}
		outputs = b
	}
	var got map[string]any
	if err := json.Unmarshal(outputs, &got); err != nil {
		t.Fatalf("terraform output -json: %v\n%s", err, outputs)
	}
	return moduleTree(t, dir), got
}

// terraform apply of a root module whose registry modules (a Git tag, a
// monorepo subdirectory calling ../shared, a tarball) have outputs only
// gives the same outputs through the mirror's host block as from the
// origin, with the same module files; and again from the sealed mirror.
// Not parallel: it restarts the mirror.
func TestTerraformModulesApplySameOutputs(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip(err)
	}
	e := newE2E(t, fakeorigin.Options{})
	addModules(t, e)
	addOutputModules(t, e)
	wantFiles, want := directModules(t, e).apply(t, outputsRoot)
	if want["app"] == nil || len(want) != 3 {
		t.Fatalf("a direct apply's outputs are not what the test expects (set-up broken): %v", want)
	}
	check := func(what string, files map[string]string, got map[string]any) {
		t.Helper()
		checkSameModules(t, what, wantFiles, files)
		for name, w := range want {
			wv, gv := w.(map[string]any)["value"], got[name].(map[string]any)["value"]
			if gv != wv {
				t.Errorf("%s: output %s is %v, a direct apply's %v", what, name, gv, wv)
			}
		}
	}
	files, got := mirrorModules(t, e).apply(t, outputsRoot)
	check("through the mirror", files, got)

	waitIdle(e.mirror.engine)
	e.stop()
	e.origin.Close()
	e.startMirror(e.dataDir, "--offline")
	files, got = mirrorModules(t, e).apply(t, outputsRoot)
	check("sealed, the origin gone", files, got)
}

// waitAdminSocket waits (a bounded while) until the mirror serving
// dataDir accepts connections on its admin socket, which it opens once
// it serves.
func waitAdminSocket(t *testing.T, dataDir string) {
	t.Helper()
	path := filepath.Join(dataDir, "tfmirror.sock")
	// Milliseconds, unless the machine is loaded.
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return
		}
	}
	t.Fatalf("no admin socket %s after a minute", path)
}

// An in-house module, a plain directory of its files imported with
// --allow-unsigned into a sealed mirror, is installed and applied by
// terraform through a host block for its host (no origin) that points
// modules.v1 at the mirror.
func TestImportLocalModuleThenApply(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{})
	e.stop()
	in := t.TempDir()
	mod := filepath.Join(in, "modules", "tf.corp.example", "platform", "network", "aws", "1.2.0")
	files := map[string]string{
		"main.tf":         "module \"subnets\" {\n  source = \"./subnets\"\n}\n\noutput \"cidr\" {\n  value = module.subnets.cidr\n}\n",
		"subnets/cidr.tf": "output \"cidr\" {\n  value = \"10.0.0.0/16\"\n}\n",
	}
	for name, data := range files {
		p := filepath.Join(mod, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(t.TempDir(), "data")
	if code, out, errOut := runCommand("import", "--data-dir", data, "--allow-unsigned", in); code != 0 || !strings.Contains(out, "modules: 1 packages imported") {
		t.Fatalf("import exited %d:\n%s%s", code, out, errOut)
	}
	e.startMirror(data, "--offline")
	conf := filepath.Join(t.TempDir(), "cli.tfrc")
	block := "host \"tf.corp.example\" {\n  services = {\n    \"modules.v1\" = \"" + e.url + "registry/tf.corp.example/v1/modules/\"\n  }\n}\n"
	if err := os.WriteFile(conf, []byte(block), 0o644); err != nil {
		t.Fatal(err)
	}
	root := "module \"network\" {\n  source  = \"tf.corp.example/platform/network/aws\"\n  version = \"~> 1.2\"\n}\n\noutput \"cidr\" {\n  value = module.network.cidr\n}\n"
	files2, outputs := moduleRun{registryRun{e: e, conf: conf, caFile: e.caFile}, "/nonexistent"}.apply(t, root)
	if got := outputs["cidr"].(map[string]any)["value"]; got != "10.0.0.0/16" {
		t.Errorf("output cidr is %v", got)
	}
	if _, ok := files2["network/subnets/cidr.tf"]; !ok {
		t.Errorf("the module's files were not installed: %v", files2)
	}
}
