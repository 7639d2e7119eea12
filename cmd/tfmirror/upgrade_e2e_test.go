package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// A data directory whose archives a release before chunk checksums
// (2.0.0) stored is served after the upgrade with the origin down: each
// archive is read whole against its sha256 once and its record gains the
// checksums, and terraform installs what it installed before, with the
// same lock file.
func TestUpgradeServesArchivesStoredWithoutChunkChecksums(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{ArchiveSize: 3 << 20})
	e.origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	e.origin.AddProvider("acme", "widget", []string{"0.1.0"}, []string{"linux_amd64"})
	providers := map[string]string{"random": "hashicorp/random@3.6.0", "widget": privateRegistry + "/acme/widget@0.1.0"}
	before := writeConfig(t, providers)
	if out, err := e.terraform(before, "init", "-no-color"); err != nil {
		t.Fatalf("terraform init: %v\n%s", err, out)
	}
	waitIdle(e.mirror.engine)
	e.stop()

	store, err := cache.Open(cache.Options{Dir: filepath.Join(e.dataDir, "cache")})
	if err != nil {
		t.Fatal(err)
	}
	dropped, err := cachetest.DropChunkSums(store)
	if cerr := store.Close(); err == nil {
		err = cerr
	}
	if err != nil || dropped != 2 {
		t.Fatalf("records rewritten as 2.0.0 wrote them: %d, %v; want the 2 archives", dropped, err)
	}

	e.origin.Close()
	e.startMirror(e.dataDir)
	cliConf := filepath.Join(t.TempDir(), "cli.tfrc")
	conf := fmt.Sprintf("provider_installation {\n  network_mirror {\n    url = %q\n  }\n}\n", e.url)
	if err := os.WriteFile(cliConf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	after := writeConfig(t, providers)
	if out, err := e.terraformWith(after, cliConf, e.caFile, "init", "-no-color"); err != nil {
		t.Fatalf("terraform init after the upgrade, the origin down: %v\n%s", err, out)
	}
	lockBefore, err := os.ReadFile(filepath.Join(before, ".terraform.lock.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	lockAfter, err := os.ReadFile(filepath.Join(after, ".terraform.lock.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(lockBefore, lockAfter) {
		t.Errorf("lock file after the upgrade:\n%s\nbefore:\n%s", lockAfter, lockBefore)
	}
	waitIdle(e.mirror.engine)
	e.stop()

	store, err = cache.Open(cache.Options{Dir: filepath.Join(e.dataDir, "cache")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if n, err := cachetest.WithoutChunkSums(store); err != nil || n != 0 {
		t.Errorf("archives without chunk checksums after they were served: %d, %v", n, err)
	}
}
