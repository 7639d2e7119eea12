package main

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// TestTerraformModulesStoredBeforeTodaysRules: terraform installs,
// through the mirror, two module versions whose records and packages an
// earlier release kept in the data directory: one whose //SUBDIR climbs
// out with backslashes (..\..\x, handed on as it was kept, which a client
// on Windows reads as a directory outside the package), one whose package
// holds .GIT/config. The mirror serves neither as kept: it asks the
// origin again and installs the subdirectory x and a package without
// .GIT.
func TestTerraformModulesStoredBeforeTodaysRules(t *testing.T) {
	e := newE2E(t, fakeorigin.Options{})
	o := e.origin
	subURL := o.TarballURL("sub-1.0.0.tar.gz")
	sub := fakeorigin.TarGzEntries([]fakeorigin.TarEntry{{Name: "x/main.tf", Body: "output \"from\" {\n  value = \"x\"\n}\n"}})
	o.AddTarball("sub-1.0.0.tar.gz", sub)
	o.AddModule("acme", "sub", "aws", "1.0.0", subURL+"//x")
	gitURL := o.TarballURL("dotgit-1.0.0.tar.gz")
	dotgit := fakeorigin.TarGzEntries([]fakeorigin.TarEntry{{Name: "main.tf", Body: "# dotgit\n"},
		{Name: ".GIT/config", Body: "[core]\n\tfsmonitor = touch /tmp/pwned\n"}})
	o.AddTarball("dotgit-1.0.0.tar.gz", dotgit)
	o.AddModule("acme", "dotgit", "aws", "1.0.0", gitURL)

	// What an earlier release kept, written into the data directory.
	e.stop()
	store, err := cache.Open(cache.Options{Dir: filepath.Join(e.dataDir, "cache")})
	if err != nil {
		t.Fatal(err)
	}
	keep := func(name string, pkg []byte, rec records.ModuleRecord) {
		sha, err := cachetest.PutBlob(store, pkg)
		if err != nil {
			t.Fatal(err)
		}
		m, err := addrs.ParseModule(tfRegistry + "/acme/" + name + "/aws")
		if err != nil {
			t.Fatal(err)
		}
		rec.Schema, rec.Module, rec.Version, rec.Kind = records.Schema, m.String(), "1.0.0", modsource.KindArchive
		rec.SHA256, rec.Size, rec.FetchedAt = sha, int64(len(pkg)), time.Now().UTC()
		v, _ := addrs.ParseModuleVersion("1.0.0")
		if err := store.PutMeta(records.ModuleRecordKey(m, v), &rec); err != nil {
			t.Fatal(err)
		}
	}
	keep("sub", sub, records.ModuleRecord{Location: subURL + `//..\..\x`, Package: subURL, Subdir: `..\..\x`})
	keep("dotgit", dotgit, records.ModuleRecord{Location: gitURL, Package: gitURL})
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	e.startMirror(e.dataDir)
	r := mirrorModules(t, e)

	dir := t.TempDir()
	root := "module \"s\" {\n  source  = \"acme/sub/aws\"\n  version = \"1.0.0\"\n}\n" +
		"module \"g\" {\n  source  = \"acme/dotgit/aws\"\n  version = \"1.0.0\"\n}\n" +
		"output \"from\" {\n  value = module.s.from\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(root), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.tf, "init", "-no-color")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TF_CLI_CONFIG_FILE=" + r.conf,
		"SSL_CERT_FILE=" + r.caFile, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1", "TF_INPUT=0"}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("terraform init failed: %v\n%s", err, b)
	}
	b, err := os.ReadFile(filepath.Join(dir, ".terraform", "modules", "modules.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"Dir":".terraform/modules/s/x"`) {
		t.Errorf("modules.json does not install s from its subdirectory x:\n%s", b)
	}
	err = filepath.WalkDir(filepath.Join(dir, ".terraform", "modules", "g"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.EqualFold(d.Name(), ".git") {
			t.Errorf("terraform installed %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
