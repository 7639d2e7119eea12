package main

// End-to-end tests of the lock files the real terraform writes through
// the mirror's two doors (a host block, network_mirror), against what it
// writes installing from the origin directly: prerelease versions, a
// SHA256SUMS naming more files than the registry's platforms, an upgrade
// when the origin publishes, and one door's lock file read by the other.

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// installedVersion is the version terraform init's output says it
// installed of NAMESPACE/TYPE ("" when none).
func installedVersion(out, provider string) string {
	_, rest, ok := strings.Cut(out, "- Installed "+provider+" v")
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, " ")
	return v
}

// Prerelease versions are chosen only by an exact constraint, through
// both doors as from the origin, and the host block's lock file is the
// direct install's.
func TestTerraformLockPrereleaseVersions(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{SeparateDownloadHost: true, ReleaseManifest: true})
	e.origin.AddProvider("hashicorp", "random", []string{"3.6.0", "3.7.0-beta1", "3.7.0-rc.2+build.5", "3.8.0-RC1"}, registryPlatforms())
	origin, mirror := direct(t, e), throughMirror(t, e, "")
	for constraint, want := range map[string]string{
		"3.7.0-beta1":        "3.7.0-beta1",
		"3.7.0-rc.2+build.5": "3.7.0-rc.2+build.5",
		"3.8.0-RC1":          "3.8.0-RC1",
		">= 3.6.0":           "3.6.0",
	} {
		providers := map[string]string{"random": "hashicorp/random@" + constraint}
		wantLock, wantOut := origin.init(t, providers)
		if got := installedVersion(wantOut, "hashicorp/random"); got != want {
			t.Fatalf("%s: a direct install chose %q, want %s (the set-up is broken):\n%s", constraint, got, want, wantOut)
		}
		gotLock, out := mirror.init(t, providers)
		checkSameInstall(t, "host block, "+constraint, wantLock, gotLock, wantOut, out)

		dir := writeConfig(t, providers)
		out, err := e.terraform(dir, "init", "-no-color")
		if err != nil {
			t.Fatalf("network mirror, %s: %v\n%s", constraint, err, out)
		}
		if got := installedVersion(out, "hashicorp/random"); got != want {
			t.Errorf("network mirror, %s: installed %q, want %s:\n%s", constraint, got, want, out)
		}
	}
}

// A SHA256SUMS listing, beside the registry's platforms' zips, a zip of
// a platform the versions list does not name and files of the release
// such as an SBOM per archive, or files of no release's shape (a source
// archive, an SBOM of the release): terraform records a zh: for every line,
// through the host block as directly; the network mirror installs.
func TestTerraformLockSumsNamingExtraFiles(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{SeparateDownloadHost: true, ReleaseManifest: true})
	pls := registryPlatforms()
	e.origin.AddProvider("hashicorp", "null", []string{"3.2.0"}, pls)
	extra := []string{
		strings.Repeat("ab", 32) + "  terraform-provider-null_3.2.0_freebsd_amd64.zip",
		strings.Repeat("CD", 32) + " *terraform-provider-null_3.2.0_linux_amd64.zip.sbom.json",
		strings.Repeat("ef", 32) + "  terraform-provider-null_3.2.0_src.tar.gz",
		// Of no release's shape: a release tool's source archive and an
		// SBOM of the whole release. Terraform installs the release
		// directly; the mirror used to refuse its SHA256SUMS whole.
		strings.Repeat("01", 32) + "  terraform-provider-null-3.2.0.tar.gz",
		strings.Repeat("23", 32) + "  terraform-provider-null_3.2.0.sbom.json",
	}
	e.origin.SetExtraSumsLines("hashicorp", "null", "3.2.0", extra...)
	providers := map[string]string{"null": "hashicorp/null@3.2.0"}

	want, wantOut := direct(t, e).init(t, providers)
	if n := zhCount(want); n != len(pls)+1+len(extra) {
		t.Fatalf("a direct install recorded %d zh: hashes, want %d (the set-up is broken):\n%s", n, len(pls)+1+len(extra), want)
	}
	got, out := throughMirror(t, e, "").init(t, providers)
	checkSameInstall(t, "host block", want, got, wantOut, out)

	dir := writeConfig(t, providers)
	if out, err := e.terraform(dir, "init", "-no-color"); err != nil {
		t.Fatalf("network mirror: %v\n%s", err, out)
	}
}

// When the origin publishes a version, init -upgrade through either door
// takes it once the version list is refreshed, and through the host
// block writes the direct install's lock file; a lock file written
// through one door (or by providers lock for several platforms) is
// accepted as it is (-lockfile=readonly) through the other.
func TestTerraformLockUpgradeAndReadonlyAcrossDoors(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{SeparateDownloadHost: true, ReleaseManifest: true}, "--versions-ttl", "1ns")
	pls := registryPlatforms()
	e.origin.AddProvider("hashicorp", "random", []string{"3.5.0"}, pls)
	providers := map[string]string{"random": "hashicorp/random@>= 3.5.0"}
	origin, mirror := direct(t, e), throughMirror(t, e, "")
	directDir, hostDir, netDir := writeConfig(t, providers), writeConfig(t, providers), writeConfig(t, providers)
	origin.run(t, directDir, "init", "-no-color")
	mirror.run(t, hostDir, "init", "-no-color")
	if out, err := e.terraform(netDir, "init", "-no-color"); err != nil {
		t.Fatalf("network mirror: %v\n%s", err, out)
	}

	e.origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, pls)
	wantOut := origin.run(t, directDir, "init", "-no-color", "-upgrade")
	out := mirror.run(t, hostDir, "init", "-no-color", "-upgrade")
	want := readLock(t, directDir)
	if !strings.Contains(string(want), `version     = "3.6.0"`) {
		t.Fatalf("a direct init -upgrade did not lock 3.6.0 (the set-up is broken):\n%s", want)
	}
	checkSameInstall(t, "host block, init -upgrade", want, readLock(t, hostDir), wantOut, out)
	out, err := e.terraform(netDir, "init", "-no-color", "-upgrade")
	if err != nil || installedVersion(out, "hashicorp/random") != "3.6.0" {
		t.Fatalf("network mirror, init -upgrade: %v, want 3.6.0 installed\n%s", err, out)
	}

	readonly := func(what string, lock []byte, init func(dir string) (string, error)) {
		t.Helper()
		dir := writeConfig(t, providers)
		writeFile(t, filepath.Join(dir, ".terraform.lock.hcl"), lock)
		if out, err := init(dir); err != nil {
			t.Errorf("%s: init -lockfile=readonly failed: %v\n%s", what, err, out)
		}
	}
	netInit := func(dir string) (string, error) { return e.terraform(dir, "init", "-no-color", "-lockfile=readonly") }
	hostInit := func(dir string) (string, error) {
		return e.terraformWith(dir, mirror.conf, mirror.caFile, "init", "-no-color", "-lockfile=readonly")
	}
	// The direct install's lock file through both doors.
	readonly("direct lock, network mirror", want, netInit)
	readonly("direct lock, host block", want, hostInit)

	// providers lock for two platforms through the host block, then
	// through the network mirror (-net-mirror): each platform's h1:.
	two := []string{"-platform=linux_amd64", "-platform=darwin_arm64"}
	lockDir := writeConfig(t, providers)
	mirror.run(t, lockDir, append([]string{"providers", "lock", "-no-color"}, two...)...)
	hostLock := readLock(t, lockDir)
	lockDir = writeConfig(t, providers)
	if out, err := e.terraform(lockDir, append([]string{"providers", "lock", "-no-color", "-net-mirror=" + e.url}, two...)...); err != nil {
		t.Fatalf("providers lock -net-mirror: %v\n%s", err, out)
	}
	netLock := readLock(t, lockDir)
	for _, pl := range []string{"linux_amd64", "darwin_arm64"} {
		data := e.origin.Archive("hashicorp", "random", "3.6.0", pl)
		h1, err := verify.H1(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		for what, lock := range map[string][]byte{"host block": hostLock, "-net-mirror": netLock} {
			if !bytes.Contains(lock, []byte(h1)) {
				t.Errorf("providers lock through the %s lacks %s's %s:\n%s", what, pl, h1, lock)
			}
		}
	}
	readonly("host block providers lock, network mirror", hostLock, netInit)
	readonly("-net-mirror providers lock, host block", netLock, hostInit)
}
