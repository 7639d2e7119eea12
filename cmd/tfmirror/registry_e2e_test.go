package main

// End-to-end tests of the provider registry protocol front door: the real
// terraform binary reaches registry.terraform.io through a CLI host block
// that points its providers.v1 service at the mirror, and must write the
// same lock file as when it installs from the origin directly.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/proxy"
)

// registryPlatforms are the four platforms the fake origin signs
// packages for; the one terraform runs on is among them.
func registryPlatforms() []string {
	pls := []string{"linux_amd64", "darwin_arm64", "windows_amd64", "linux_arm64"}
	host := runtime.GOOS + "_" + runtime.GOARCH
	for _, pl := range pls {
		if pl == host {
			return pls
		}
	}
	return append(pls[:3], host)
}

// hostBlockConf writes a CLI configuration whose only provider source is
// registry host's providers.v1 service at providersURL, and returns its
// path.
func hostBlockConf(t *testing.T, host, providersURL string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cli.tfrc")
	conf := fmt.Sprintf("host %q {\n  services = {\n    \"providers.v1\" = %q\n  }\n}\n", host, providersURL)
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// registryRun is terraform run in one way: directly against the origin,
// or through the mirror's registry protocol.
type registryRun struct {
	e      *e2e
	conf   string // CLI configuration file
	caFile string
}

func direct(t *testing.T, e *e2e) registryRun {
	t.Helper()
	return directAs(t, e, tfRegistry)
}

// directAs is the client installing from the origin directly, as registry
// host.
func directAs(t *testing.T, e *e2e, host string) registryRun {
	t.Helper()
	ca, err := e.origin.CAFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return registryRun{e: e, conf: hostBlockConf(t, host, e.origin.URL+"/v1/providers/"), caFile: ca}
}

// throughMirror is terraform with the host block that the mirror's status
// page gives for registry.terraform.io, and extra, as its CLI configuration.
func throughMirror(t *testing.T, e *e2e, extra string) registryRun {
	t.Helper()
	return throughMirrorAs(t, e, tfRegistry, extra)
}

// throughMirrorAs is the client with the host block that the mirror's
// status page gives for registry host, and extra, as its CLI configuration.
func throughMirrorAs(t *testing.T, e *e2e, host, extra string) registryRun {
	t.Helper()
	resp, err := trustingClient(t, e.caFile).Get(e.url + "?format=json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st proxy.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	block := st.HostBlocks[host]
	if !strings.Contains(block, `"providers.v1" = "`+e.url+proxy.RegistryPath(host)+`"`) {
		t.Fatalf("the status page's host block for %s does not point at the mirror:\n%s", host, block)
	}
	path := filepath.Join(t.TempDir(), "cli.tfrc")
	if err := os.WriteFile(path, []byte(block+extra), 0o644); err != nil {
		t.Fatal(err)
	}
	return registryRun{e: e, conf: path, caFile: e.caFile}
}

// run runs terraform with args in dir and returns its output; it fails
// the test when terraform fails.
func (r registryRun) run(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := r.e.terraformWith(dir, r.conf, r.caFile, args...)
	if err != nil {
		t.Fatalf("terraform %s failed: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// init runs terraform init in a fresh directory and returns the lock
// file it wrote and its output.
func (r registryRun) init(t *testing.T, providers map[string]string) (lock []byte, out string) {
	t.Helper()
	dir := writeConfig(t, providers)
	out = r.run(t, dir, "init", "-no-color")
	return readLock(t, dir), out
}

func readLock(t *testing.T, dir string) []byte {
	t.Helper()
	lock, err := os.ReadFile(filepath.Join(dir, ".terraform.lock.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	return lock
}

// installedLine is terraform init's line saying what it installed and how
// the package was authenticated ("(self-signed, key ID ...)").
var installedLine = regexp.MustCompile(`(?m)^- Installed .*$`)

// checkSameInstall fails unless got is byte for byte the lock file want
// and the output says the same signed install without a warning about
// incomplete lock file information.
func checkSameInstall(t *testing.T, what string, want, got []byte, wantOut, gotOut string) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s: lock file differs from a direct install's\ngot:\n%s\nwant:\n%s", what, got, want)
	}
	if strings.Contains(gotOut, "Incomplete lock file information") {
		t.Errorf("%s: terraform warned of incomplete lock file information:\n%s", what, gotOut)
	}
	// terraform installs several providers in no fixed order.
	w, g := installedLine.FindAllString(wantOut, -1), installedLine.FindAllString(gotOut, -1)
	slices.Sort(w)
	slices.Sort(g)
	if len(w) == 0 || !slices.Equal(g, w) || slices.ContainsFunc(w, func(l string) bool { return !strings.Contains(l, "signed") }) {
		t.Errorf("%s: terraform said %q, a direct install %q (want signed packages)", what, g, w)
	}
}

// zhCount counts the zh: hashes in a lock file.
func zhCount(lock []byte) int { return bytes.Count(lock, []byte(`"zh:`)) }

func TestTerraformInitThroughHostBlock(t *testing.T) {
	t.Parallel()
	// SHA256SUMS list the release's manifest.json, as real registries'
	// do, and Terraform records its hash too.
	e := newE2E(t, fakeorigin.Options{SeparateDownloadHost: true, ReleaseManifest: true})
	pls := registryPlatforms()
	e.origin.AddProvider("hashicorp", "random", []string{"3.5.0", "3.6.0"}, pls)
	providers := map[string]string{"random": "hashicorp/random@3.6.0"}
	origin, mirror := direct(t, e), throughMirror(t, e, "")

	want, wantOut := origin.init(t, providers)
	if n := zhCount(want); n != len(pls)+1 {
		t.Fatalf("a direct install recorded %d zh: hashes, want %d (the set-up is broken):\n%s", n, len(pls)+1, want)
	}
	e.origin.ResetHits()
	got, out := mirror.init(t, providers)
	checkSameInstall(t, "first init through the host block", want, got, wantOut, out)
	if n := e.origin.Hits(fakeorigin.Archive); n != 1 {
		t.Errorf("origin archive fetches for the first init = %d, want 1", n)
	}

	// A second init in a fresh directory is served from the cache.
	waitIdle(e.mirror.engine)
	e.origin.ResetHits()
	got, out = mirror.init(t, providers)
	checkSameInstall(t, "second init through the host block", want, got, wantOut, out)
	if n := e.origin.Hits(fakeorigin.Archive); n != 0 {
		t.Errorf("the second init made %d origin archive requests, want 0", n)
	}
	if n := e.origin.Hits(fakeorigin.Shasums) + e.origin.Hits(fakeorigin.Signature); n != 0 {
		t.Errorf("the second init made %d origin SHA256SUMS or signature requests, want 0", n)
	}

	// terraform providers lock for two platforms writes what it writes
	// against the origin.
	lockArgs := []string{"providers", "lock", "-no-color", "-platform=linux_amd64", "-platform=darwin_arm64"}
	dir := writeConfig(t, providers)
	origin.run(t, dir, lockArgs...)
	wantLock := readLock(t, dir)
	dir = writeConfig(t, providers)
	mirror.run(t, dir, lockArgs...)
	if gotLock := readLock(t, dir); !bytes.Equal(gotLock, wantLock) {
		t.Errorf("providers lock through the host block wrote\n%s\nagainst the origin\n%s", gotLock, wantLock)
	}
	if n := bytes.Count(wantLock, []byte(`"h1:`)); n != 2 {
		t.Errorf("providers lock recorded %d h1: hashes, want 2:\n%s", n, wantLock)
	}
}

// Not parallel: it reopens the cache of a mirror it stopped, and Badger's
// directory lock (flock) stays held while a child process that a parallel
// test starts is between fork and exec with a copy of the lock's file
// descriptor; under load the reopen then failed ("Cannot acquire
// directory lock", seen in a full go test -race ./...).
func TestTerraformHostBlockOriginDownAndOffline(t *testing.T) {
	e := newE2E(t, fakeorigin.Options{SeparateDownloadHost: true}, "--versions-ttl", "1ns")
	e.origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, registryPlatforms())
	providers := map[string]string{"random": "hashicorp/random@3.6.0"}
	want, wantOut := direct(t, e).init(t, providers)
	throughMirror(t, e, "").init(t, providers) // warm
	waitIdle(e.mirror.engine)

	e.origin.SetDown(http.StatusBadGateway)
	e.origin.ResetHits()
	got, out := throughMirror(t, e, "").init(t, providers)
	checkSameInstall(t, "origin down", want, got, wantOut, out)
	if e.origin.Hits(fakeorigin.Versions) == 0 {
		t.Error("the mirror did not try to refresh the version list")
	}

	// The same cache, sealed.
	e.stop()
	e.startMirror(e.dataDir, "--offline")
	e.origin.ResetHits()
	got, out = throughMirror(t, e, "").init(t, providers)
	checkSameInstall(t, "--offline", want, got, wantOut, out)
	if n := e.origin.TotalHits(); n != 0 {
		t.Errorf("the offline mirror made %d origin requests", n)
	}
}

func TestTerraformHostBlockWithClientAuth(t *testing.T) {
	t.Parallel()
	const token = "e2e-registry-token.0123456789"
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newE2E(t, fakeorigin.Options{SeparateDownloadHost: true}, "--auth-tokens-file", tokens)
	e.origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, registryPlatforms())
	providers := map[string]string{"random": "hashicorp/random@3.6.0"}
	want, wantOut := direct(t, e).init(t, providers)

	// Without credentials, and with a wrong token: refused with 401.
	for i, tc := range []struct{ name, extra, says string }{
		{"no credentials", "", "requires authentication credentials"},
		{"wrong token", fmt.Sprintf("credentials %q {\n  token = \"wrong\"\n}\n", tfRegistry), "rejected the given authentication credentials"},
	} {
		dir := writeConfig(t, providers)
		out, err := e.terraformWith(dir, throughMirror(t, e, tc.extra).conf, e.caFile, "init", "-no-color")
		if err == nil {
			t.Fatalf("%s: terraform init succeeded:\n%s", tc.name, out)
		}
		if !strings.Contains(strings.Join(strings.Fields(out), " "), tc.says) {
			t.Errorf("%s: terraform's error does not say %q:\n%s", tc.name, tc.says, out)
		}
		if after := metric(t, e.mirror.registry, "tfmirror_http_requests_total", "route", "registry_versions", "code", "401"); after != float64(i+1) {
			t.Errorf("%s: the mirror answered %v versions requests with 401 so far, want %d", tc.name, after, i+1)
		}
	}

	// With the mirror's token configured for the ORIGIN's host name.
	creds := fmt.Sprintf("credentials %q {\n  token = %q\n}\n", tfRegistry, token)
	got, out := throughMirror(t, e, creds).init(t, providers)
	checkSameInstall(t, "with client authentication", want, got, wantOut, out)
}

// TestTerraformInitOfAProviderWhoseKeyHasExpired: a provider whose
// publisher's signing key has expired since it signed the version's
// SHA256SUMS (a key made to expire, its expiry let pass, as many
// publishers' are) installs through the mirror as it does directly, by
// the registry protocol and by the network mirror protocol: Terraform
// accepts such a key (with a warning in its log), and the mirror, which
// refused it on a first pull, now judges it as Terraform does.
func TestTerraformInitOfAProviderWhoseKeyHasExpired(t *testing.T) {
	t.Parallel()
	// The key was made on 1 January 2000 and expired a year later; it
	// signed in June 2000.
	e := newE2E(t, fakeorigin.Options{SigningKeyExpiry: 365 * 24 * time.Hour})
	e.origin.AddProvider("acme", "old", []string{"1.0.0"}, []string{"linux_amd64"})
	e.origin.SetSignedAt("acme", "old", "1.0.0", time.Date(2000, 6, 1, 0, 0, 0, 0, time.UTC))
	providers := map[string]string{"old": "acme/old@1.0.0"}

	want, wantOut := direct(t, e).init(t, providers)
	got, out := throughMirror(t, e, "").init(t, providers)
	checkSameInstall(t, "init through the host block", want, got, wantOut, out)

	// The network mirror protocol: the mirror's check is the only one.
	dir := writeConfig(t, providers)
	if out, err := e.terraform(dir, "init", "-no-color"); err != nil {
		t.Fatalf("terraform init through the network mirror: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, ".terraform", "providers", "registry.terraform.io", "acme", "old", "1.0.0", "linux_amd64")); err != nil {
		t.Errorf("provider not installed through the network mirror: %v", err)
	}
}
