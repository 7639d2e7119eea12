package main

// End-to-end test of a registry module spelled in two cases: the real
// terraform binary installs one module named as acme/net/aws and as
// Acme/Net/aws through the mirror's host block, as it does from an
// origin that answers names in any case (registry.terraform.io does).

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// caseRoot calls one module in two spellings.
const caseRoot = `module "lower" {
  source  = "acme/net/aws"
  version = "1.0.0"
}

module "mixed" {
  source  = "Acme/Net/aws"
  version = "1.0.0"
}
`

// initRoot is init of root in a fresh directory.
func (r moduleRun) initRoot(t *testing.T, root string) (dir, out string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(root), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.e.tf, "init", "-no-color")
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TF_CLI_CONFIG_FILE=" + r.conf,
		"SSL_CERT_FILE=" + r.caFile, "GIT_SSL_CAINFO=" + r.gitCA,
		"GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
		"CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1", "TF_INPUT=0",
	}
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("terraform init failed: %v\n%s", err, b)
	}
	return dir, string(b)
}

// A module called in two spellings installs through the mirror as it
// does directly (the same files, modules.json and lock file), and the
// mirror asks the origin for its version list, its download location
// and its package once: the two spellings are one module.
func TestTerraformModuleSpelledInTwoCases(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{ModulesAnyCase: true})
	o := e.origin
	o.AddProvider("hashicorp", "random", []string{"3.6.0"}, registryPlatforms())
	o.AddTarball("net-1.0.0.tar.gz", fakeorigin.TarGz(map[string][]byte{
		"main.tf": []byte("terraform {\n  required_providers {\n    random = {\n      source  = \"hashicorp/random\"\n      version = \"3.6.0\"\n    }\n  }\n}\n"),
	}))
	o.AddModule("acme", "net", "aws", "1.0.0", o.TarballURL("net-1.0.0.tar.gz"))

	dir, wantOut := directModules(t, e).initRoot(t, caseRoot)
	want, wantLock := moduleTree(t, dir), readLock(t, dir)
	if _, ok := want["mixed/main.tf"]; !ok {
		t.Fatalf("the direct install is not what the test expects (set-up broken): %v", want)
	}

	o.ResetHits()
	mr := mirrorModules(t, e)
	dir, out := mr.initRoot(t, caseRoot)
	checkSameModules(t, "init through the mirror", want, moduleTree(t, dir))
	checkSameInstall(t, "init through the mirror", wantLock, readLock(t, dir), wantOut, out)
	for _, k := range []fakeorigin.Kind{fakeorigin.ModuleVersions, fakeorigin.ModuleDownload, fakeorigin.Tarball} {
		if n := o.Hits(k); n != 1 {
			t.Errorf("%d %s requests at the origin for one module in two spellings, want 1", n, k)
		}
	}
}

// TestTerraformModuleKeptUnderEarlierSpelling: terraform installs,
// through the mirror, a module version that an earlier release kept in
// the data directory under the spelling a client used then
// (Corp/Net/aws), asked for now in another (corp/NET/aws). It was
// imported, and its origin does not have it: the records kept are its
// only copy, found under the module's normal form after the upgrade.
func TestTerraformModuleKeptUnderEarlierSpelling(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{})
	pkg := fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("output \"from\" {\n  value = \"kept\"\n}\n")})

	// What an earlier release kept, written into the data directory.
	e.stop()
	store, err := cache.Open(cache.Options{Dir: filepath.Join(e.dataDir, "cache")})
	if err != nil {
		t.Fatal(err)
	}
	sha, err := cachetest.PutBlob(store, pkg)
	if err != nil {
		t.Fatal(err)
	}
	spelled := tfRegistry + "/Corp/Net/aws"
	loc := e.origin.TarballURL("net-1.0.0.tar.gz") // not there any more
	for key, doc := range map[string]any{
		"module/" + spelled + "/1.0.0": records.ModuleRecord{Schema: records.Schema, Module: spelled, Version: "1.0.0",
			Location: loc, Kind: modsource.KindArchive, Package: loc, SHA256: sha, Size: int64(len(pkg)),
			FetchedAt: time.Now().UTC(), Provenance: records.ProvenanceImported},
		"modversions/" + spelled: records.ModuleVersionList{Schema: records.Schema, Versions: []string{"1.0.0"}, ListedAt: time.Now().UTC()},
	} {
		if err := store.PutMeta(key, doc); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	e.startMirror(e.dataDir)

	root := "module \"net\" {\n  source  = \"corp/NET/aws\"\n  version = \"1.0.0\"\n}\n\noutput \"from\" {\n  value = module.net.from\n}\n"
	dir, _ := mirrorModules(t, e).initRoot(t, root)
	b, err := os.ReadFile(filepath.Join(dir, ".terraform", "modules", "net", "main.tf"))
	if err != nil || !strings.Contains(string(b), `"kept"`) {
		t.Errorf("installed main.tf: %q, %v; want the package kept", b, err)
	}
}
