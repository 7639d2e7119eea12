package main

// End-to-end tests with the real OpenTofu client, through both front
// doors, against the fake origin answering as registry.opentofu.org
// (OpenTofu's default registry). OpenTofu cannot be installed from the
// package registries, so these run only when TFMIRROR_TOFU names a tofu
// binary, and skip otherwise, in CI too.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// tofuBinary is the OpenTofu binary TFMIRROR_TOFU names; without one the
// test skips.
func tofuBinary(t *testing.T) string {
	t.Helper()
	return toolFromEnv(t, "TFMIRROR_TOFU", "an OpenTofu binary to run the OpenTofu end-to-end tests")
}

// toolFromEnv is the file the environment variable env names, a client
// no package registry carries (what: which, and the tests it runs);
// without one the test skips, in CI too.
func toolFromEnv(t *testing.T, env, what string) string {
	t.Helper()
	path := os.Getenv(env)
	if path == "" {
		t.Skipf("set %s to %s", env, what)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s: %v", env, err)
	}
	return path
}

// newTofuE2E is newE2E with OpenTofu as the client and the provider
// hashicorp/random 3.5.0 and 3.6.0 at the origin, for every platform of
// registryPlatforms. The origin's download answers have "packages", as
// registry.opentofu.org's.
func newTofuE2E(t *testing.T, extraFlags ...string) *e2e {
	t.Helper()
	e := newClientE2E(t, tofuBinary(t), fakeorigin.Options{SeparateDownloadHost: true, PackageHashes: true}, extraFlags...)
	e.origin.AddProvider("hashicorp", "random", []string{"3.5.0", "3.6.0"}, registryPlatforms())
	return e
}

var tofuProviders = map[string]string{"random": "hashicorp/random@3.6.0"}

// hashesOf returns the h1: and zh: hashes of the origin's random 3.6.0
// package for platform.
func hashesOf(t *testing.T, e *e2e, platform string) (h1, zh string) {
	t.Helper()
	data := e.origin.Archive("hashicorp", "random", "3.6.0", platform)
	h1, err := verify.H1(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return h1, "zh:" + e.origin.SHA256("hashicorp", "random", "3.6.0", platform)
}

// mirrorConf writes a CLI configuration with only a network_mirror block
// at e's mirror, with extra inside the block, and returns its path.
func mirrorConf(t *testing.T, e *e2e, extra string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cli.tfrc")
	conf := fmt.Sprintf("provider_installation {\n  network_mirror {\n    url = %q\n%s  }\n}\n", e.url, extra)
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTofuInitThroughMirror(t *testing.T) {
	t.Parallel()
	e := newTofuE2E(t)
	conf := mirrorConf(t, e, "")
	host := runtime.GOOS + "_" + runtime.GOARCH

	for i, what := range []string{"first init (cold cache)", "second init (from the cache)"} {
		e.origin.ResetHits()
		dir := writeConfig(t, tofuProviders)
		out, err := e.terraformWith(dir, conf, e.caFile, "init", "-no-color")
		if err != nil {
			t.Fatalf("%s: tofu init through the mirror failed: %v\n%s", what, err, out)
		}
		plugin := filepath.Join(dir, ".terraform", "providers", tofuRegistry, "hashicorp", "random", "3.6.0", host, "terraform-provider-random_v3.6.0")
		if _, err := os.Stat(plugin); err != nil {
			t.Errorf("%s: provider not installed: %v", what, err)
		}
		if !strings.Contains(out, "Incomplete lock file information") {
			t.Errorf("%s: tofu did not warn of incomplete lock file information:\n%s", what, out)
		}
		// OpenTofu records the hashes of the mirror's VERSION.json that
		// it verified: the h1: and zh: of the platform it runs on, and
		// no other platform's.
		lock := readLock(t, dir)
		h1, zh := hashesOf(t, e, host)
		for _, h := range []string{h1, zh} {
			if !bytes.Contains(lock, []byte(`"`+h+`"`)) {
				t.Errorf("%s: the lock file lacks %s:\n%s", what, h, lock)
			}
		}
		if n := zhCount(lock); n != 1 {
			t.Errorf("%s: the lock file has %d zh: hashes, want 1:\n%s", what, n, lock)
		}
		if n, want := e.origin.Hits(fakeorigin.Archive), 1-i; n != want {
			t.Errorf("%s: %d origin archive fetches, want %d", what, n, want)
		}
		waitIdle(e.mirror.engine)
	}
}

// cacheOtherPlatform has e's mirror cache the archive of random 3.6.0 of
// host for a platform other than the one tofu runs on, and returns it.
func cacheOtherPlatform(t *testing.T, e *e2e, host string) string {
	t.Helper()
	var other string
	for _, pl := range registryPlatforms() {
		if pl != runtime.GOOS+"_"+runtime.GOARCH {
			other = pl
			break
		}
	}
	resp, err := trustingClient(t, e.caFile).Get(e.url + host + "/hashicorp/random/terraform-provider-random_3.6.0_" + other + ".zip")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("archive for %s: status %d", other, resp.StatusCode)
	}
	waitIdle(e.mirror.engine)
	return other
}

// TestTofuTrustAllHashes checks what docs/lock-files.md says of OpenTofu's
// network_mirror { trust_all_hashes = true } for a provider of
// registry.opentofu.org: the lock file gets the signed zh: of every
// platform and the h1: of the platforms whose archive the mirror has
// cached, without the incomplete lock file warning.
func TestTofuTrustAllHashes(t *testing.T) {
	t.Parallel()
	e := newTofuE2E(t)
	pls := registryPlatforms()
	host := runtime.GOOS + "_" + runtime.GOARCH
	other := cacheOtherPlatform(t, e, tofuRegistry)

	dir := writeConfig(t, tofuProviders)
	out, err := e.terraformWith(dir, mirrorConf(t, e, "    trust_all_hashes = true\n"), e.caFile, "init", "-no-color")
	if err != nil {
		t.Fatalf("tofu init with trust_all_hashes failed: %v\n%s", err, out)
	}
	if strings.Contains(out, "Incomplete lock file information") {
		t.Errorf("tofu warned of incomplete lock file information:\n%s", out)
	}
	lock := readLock(t, dir)
	for _, pl := range pls {
		h1, zh := hashesOf(t, e, pl)
		if !bytes.Contains(lock, []byte(`"`+zh+`"`)) {
			t.Errorf("the lock file lacks %s's %s:\n%s", pl, zh, lock)
		}
		cached := pl == host || pl == other
		if got := bytes.Contains(lock, []byte(`"`+h1+`"`)); got != cached {
			t.Errorf("the lock file has %s's h1: %v, want %v (cached: %v):\n%s", pl, got, cached, cached, lock)
		}
	}
	if n := zhCount(lock); n != len(pls) {
		t.Errorf("the lock file has %d zh: hashes, want %d:\n%s", n, len(pls), lock)
	}
}

// The other side of the line docs/lock-files.md draws: for a provider of any other
// host (here registry.terraform.io), OpenTofu keeps in the lock file only
// hashes it checked against a signature itself, so trust_all_hashes
// changes nothing: the hashes of the platform it runs on only, and the
// incomplete lock file warning, as without it; even a platform whose
// archive the mirror has cached gets no hash.
func TestTofuTrustAllHashesOtherHost(t *testing.T) {
	t.Parallel()
	e := newTofuE2E(t)
	host := runtime.GOOS + "_" + runtime.GOARCH
	other := cacheOtherPlatform(t, e, tfRegistry)

	dir := writeConfig(t, map[string]string{"random": tfRegistry + "/hashicorp/random@3.6.0"})
	out, err := e.terraformWith(dir, mirrorConf(t, e, "    trust_all_hashes = true\n"), e.caFile, "init", "-no-color")
	if err != nil {
		t.Fatalf("tofu init with trust_all_hashes failed: %v\n%s", err, out)
	}
	if !strings.Contains(out, "Incomplete lock file information") {
		t.Errorf("tofu did not warn of incomplete lock file information:\n%s", out)
	}
	lock := readLock(t, dir)
	for _, pl := range []string{host, other} {
		h1, zh := hashesOf(t, e, pl)
		for _, h := range []string{h1, zh} {
			if got := bytes.Contains(lock, []byte(`"`+h+`"`)); got != (pl == host) {
				t.Errorf("the lock file has %s's %s: %v, want %v:\n%s", pl, h, got, pl == host, lock)
			}
		}
	}
	if n := zhCount(lock); n != 1 {
		t.Errorf("the lock file has %d zh: hashes, want 1:\n%s", n, lock)
	}
}

func TestTofuInitThroughHostBlock(t *testing.T) {
	t.Parallel()
	e := newTofuE2E(t)
	origin, mirror := directAs(t, e, tofuRegistry), throughMirrorAs(t, e, tofuRegistry, "")

	// From the origin's packages, OpenTofu records every platform's h1:
	// and zh:.
	want, wantOut := origin.init(t, tofuProviders)
	pls := registryPlatforms()
	if zh, h1 := zhCount(want), bytes.Count(want, []byte(`"h1:`)); zh != len(pls) || h1 != len(pls) {
		t.Fatalf("a direct install recorded %d zh: and %d h1: hashes, want %d of each (the set-up is broken):\n%s", zh, h1, len(pls), want)
	}
	for i, what := range []string{"first init through the host block", "second init through the host block"} {
		e.origin.ResetHits()
		got, out := mirror.init(t, tofuProviders)
		checkSameInstall(t, what, want, got, wantOut, out)
		if n, want := e.origin.Hits(fakeorigin.Archive), 1-i; n != want {
			t.Errorf("%s: %d origin archive fetches, want %d", what, n, want)
		}
		waitIdle(e.mirror.engine)
	}

	// tofu providers lock for two platforms writes what it writes
	// against the origin.
	lockArgs := []string{"providers", "lock", "-no-color", "-platform=linux_amd64", "-platform=darwin_arm64"}
	dir := writeConfig(t, tofuProviders)
	origin.run(t, dir, lockArgs...)
	wantLock := readLock(t, dir)
	dir = writeConfig(t, tofuProviders)
	mirror.run(t, dir, lockArgs...)
	if gotLock := readLock(t, dir); !bytes.Equal(gotLock, wantLock) {
		t.Errorf("providers lock through the host block wrote\n%s\nagainst the origin\n%s", gotLock, wantLock)
	}
}

// One invalid version string in the origin's versions answer fails
// OpenTofu's whole query when it installs from the origin directly
// (Terraform skips it); the mirror leaves such versions out of its
// answer, so through the host block OpenTofu installs as it would from a
// clean origin.
func TestTofuHostBlockSkipsAnInvalidOriginVersion(t *testing.T) {
	t.Parallel()
	e := newTofuE2E(t)
	origin, mirror := directAs(t, e, tofuRegistry), throughMirrorAs(t, e, tofuRegistry, "")
	want, wantOut := origin.init(t, tofuProviders)

	e.origin.AddProvider("hashicorp", "random", []string{"not-a-version"}, registryPlatforms())
	dir := writeConfig(t, tofuProviders)
	out, err := e.terraformWith(dir, origin.conf, origin.caFile, "init", "-no-color")
	if err == nil || !strings.Contains(out, `invalid version string "not-a-version"`) {
		t.Fatalf("a direct tofu init with an invalid version at the origin: err %v, want the failure the test is about:\n%s", err, out)
	}
	got, out := mirror.init(t, tofuProviders)
	checkSameInstall(t, "through the host block", want, got, wantOut, out)
}

// Through the host block of a sealed mirror that imported an export,
// OpenTofu writes the lock file of a direct install, with every
// platform's h1: from the origin's "packages" that came across the gap.
func TestTofuHostBlockAfterImport(t *testing.T) {
	t.Parallel()
	e := newTofuE2E(t)
	origin, mirror := directAs(t, e, tofuRegistry), throughMirrorAs(t, e, tofuRegistry, "")
	want, wantOut := origin.init(t, tofuProviders)
	if got, out := mirror.init(t, tofuProviders); !bytes.Equal(got, want) {
		t.Fatalf("through the connected mirror's host block the lock file differs from a direct install's (the set-up is broken):\n%s\n%s", got, out)
	}
	waitIdle(e.mirror.engine)
	e.stop()

	export := filepath.Join(t.TempDir(), "export")
	if code, stdout, stderr := runCommand("export", "--data-dir", e.dataDir, export); code != 0 {
		t.Fatalf("export: exit %d\n%s%s", code, stdout, stderr)
	}
	fresh := filepath.Join(t.TempDir(), "fresh")
	if code, stdout, stderr := runCommand("import", "--data-dir", fresh, "--trusted-export-keys", exporterKey(t, e.dataDir), export); code != 0 || !strings.Contains(stdout, "imported 1 packages") {
		t.Fatalf("import: exit %d\n%s%s", code, stdout, stderr)
	}
	e.startMirror(fresh, "--offline")
	got, out := throughMirrorAs(t, e, tofuRegistry, "").init(t, tofuProviders)
	checkSameInstall(t, "host block of the imported, sealed mirror", want, got, wantOut, out)
}
