package main

// OpenTofu's oci_mirror installation method against the OCI distribution
// front door, end to end: the real tofu (TFMIRROR_TOFU; skipped without
// it), the mirror as `tfmirror serve` wires it, the fake origin answering
// as registry.opentofu.org.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
)

// ociConf writes a CLI configuration whose installation methods are an
// oci_mirror block at e's mirror and then extra, and returns its path.
func ociConf(t *testing.T, e *e2e, extra string) string {
	t.Helper()
	host := strings.TrimSuffix(strings.TrimPrefix(e.url, "https://"), "/")
	conf := fmt.Sprintf("provider_installation {\n  oci_mirror {\n    repository_template = \"%s/providers/${hostname}/${namespace}/${type}\"\n  }\n%s}\n", host, extra)
	path := filepath.Join(t.TempDir(), "cli.tfrc")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTofuInitThroughOCIMirror(t *testing.T) {
	t.Parallel()
	e := newTofuE2E(t)
	e.origin.AddProvider("acme", "widget", []string{"0.1.0", "0.2.0", "1.0.0"}, registryPlatforms())
	providers := map[string]string{
		"random": "hashicorp/random@3.6.0",
		"widget": "acme/widget@~> 0.1", // 0.2.0 of three versions
	}
	conf := ociConf(t, e, "")
	host := runtime.GOOS + "_" + runtime.GOARCH

	for i, what := range []string{"first init (cold cache)", "second init (origin down)"} {
		if i == 1 {
			e.origin.ResetHits()
			e.origin.SetDown(503)
		}
		dir := writeConfig(t, providers)
		out, err := e.terraformWith(dir, conf, e.caFile, "init", "-no-color")
		if err != nil {
			t.Fatalf("%s: tofu init through oci_mirror failed: %v\n%s", what, err, out)
		}
		for _, p := range []struct{ typ, ns, version string }{{"random", "hashicorp", "3.6.0"}, {"widget", "acme", "0.2.0"}} {
			plugin := filepath.Join(dir, ".terraform", "providers", tofuRegistry, p.ns, p.typ, p.version, host)
			if _, err := os.Stat(plugin); err != nil {
				t.Errorf("%s: %s %s not installed: %v\n%s", what, p.typ, p.version, err, out)
			}
			zh := "zh:" + e.origin.SHA256(p.ns, p.typ, p.version, host)
			if lock := readLock(t, dir); !bytes.Contains(lock, []byte(`"`+zh+`"`)) {
				t.Errorf("%s: the lock file lacks the origin's SHA256SUMS entry %s:\n%s", what, zh, lock)
			}
			if i == 0 {
				if n := e.origin.ArchiveHits(p.ns, p.typ, p.version, host); n != 1 {
					t.Errorf("%s: %d origin downloads of %s's archive, want 1", what, n, p.typ)
				}
			}
		}
		if i == 1 && e.origin.Hits(fakeorigin.Archive) != 0 {
			t.Errorf("%s: archives fetched from the origin", what)
		}
		waitIdle(e.mirror.engine)
	}
}

// A provider the origin does not have answers NAME_UNKNOWN, and OpenTofu
// goes on to the next installation method (as it would to direct): here
// a network_mirror block at the same mirror, so that the test needs no
// network; OpenTofu reports both as searched, not an OCI error.
func TestTofuOCIUnknownProviderFallsThrough(t *testing.T) {
	t.Parallel()
	e := newTofuE2E(t)
	conf := ociConf(t, e, fmt.Sprintf("  network_mirror {\n    url = %q\n  }\n", e.url))
	dir := writeConfig(t, map[string]string{"nothing": "acme/nothing@1.0.0"})
	out, err := e.terraformWith(dir, conf, e.caFile, "init", "-no-color")
	if err == nil {
		t.Fatalf("tofu init of a provider nobody has succeeded:\n%s", out)
	}
	flat := strings.Join(strings.Fields(out), " ")
	if !strings.Contains(flat, "was not found in any of the search locations - OCI registry provider mirror - provider mirror at "+e.url) ||
		strings.Contains(out, "NAME_UNKNOWN") {
		t.Errorf("OpenTofu did not go on from the OCI mirror to the next method:\n%s", out)
	}
}

// With --auth-tokens-file, OpenTofu's first GET /v2/ is challenged, and
// oci_credentials with a token of the mirror as password pass (through
// the token endpoint); without them init fails. The token is never in
// the mirror's log.
func TestTofuOCIMirrorWithClientAuth(t *testing.T) {
	t.Parallel()
	const token = "oci-e2e-token-1234567890"
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &logbuf.Buffer{}
	e := &e2e{t: t, tf: tofuBinary(t), logTo: logs}
	origin, err := fakeorigin.Start(fakeorigin.Options{Hostnames: e2eOrigins, SeparateDownloadHost: true, PackageHashes: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	e.origin = origin
	e.origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, registryPlatforms())
	e.startMirror(filepath.Join(t.TempDir(), "data"), "--auth-tokens-file", tokens)
	host := strings.TrimSuffix(strings.TrimPrefix(e.url, "https://"), "/")

	anonymous := ociConf(t, e, "")
	if out, err := e.terraformWith(writeConfig(t, tofuProviders), anonymous, e.caFile, "init", "-no-color"); err == nil {
		t.Fatalf("tofu init without credentials passed:\n%s", out)
	}
	withCreds := ociConf(t, e, "")
	conf, _ := os.ReadFile(withCreds)
	conf = append(conf, fmt.Sprintf("oci_credentials %q {\n  username = \"tofu\"\n  password = %q\n}\n", host, token)...)
	if err := os.WriteFile(withCreds, conf, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := writeConfig(t, tofuProviders)
	if out, err := e.terraformWith(dir, withCreds, e.caFile, "init", "-no-color"); err != nil {
		t.Fatalf("tofu init with oci_credentials failed: %v\n%s", err, out)
	}
	waitIdle(e.mirror.engine)
	if !strings.Contains(logs.String(), "/v2/token") {
		t.Errorf("OpenTofu did not use the token endpoint; log:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), token) {
		t.Errorf("the token is in the mirror's log")
	}
}

// The origin states a wrong package_size for the archive of the host's
// platform: the index the first tofu init through the OCI mirror is
// handed names a manifest made with it, which no client could pull. The
// mirror answers that manifest only once the archive is verified, so
// the init fails at the manifest, before any blob, with the mirror's
// message saying to pull the tag again; the version's documents are made
// again from the verified size, and the next init, at once, installs the
// provider, with the origin's hashes in the lock file.
func TestTofuOCIWrongStatedSize(t *testing.T) {
	t.Parallel()
	e := newTofuE2E(t)
	host := runtime.GOOS + "_" + runtime.GOARCH
	e.origin.AddProvider("acme", "widget", []string{"1.0.0"}, registryPlatforms())
	size := int64(len(e.origin.Archive("acme", "widget", "1.0.0", host)))
	e.origin.SetStatedSize("acme", "widget", "1.0.0", host, size+1)
	conf := ociConf(t, e, "")
	providers := map[string]string{"widget": "acme/widget@1.0.0"}

	dir := writeConfig(t, providers)
	out, err := e.terraformWith(dir, conf, e.caFile, "init", "-no-color")
	if err == nil {
		t.Fatalf("tofu init of a manifest made with a wrong stated size succeeded:\n%s", out)
	}
	if !strings.Contains(strings.Join(strings.Fields(out), " "), "pull the tag again") {
		t.Errorf("tofu init failed without the mirror's word on what to do:\n%s", out)
	}

	dir = writeConfig(t, providers)
	out, err = e.terraformWith(dir, conf, e.caFile, "init", "-no-color")
	if err != nil {
		t.Fatalf("tofu init after the archive was verified: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, ".terraform", "providers", tofuRegistry, "acme", "widget", "1.0.0", host)); err != nil {
		t.Errorf("widget not installed: %v\n%s", err, out)
	}
	if zh := "zh:" + e.origin.SHA256("acme", "widget", "1.0.0", host); !bytes.Contains(readLock(t, dir), []byte(`"`+zh+`"`)) {
		t.Errorf("the lock file lacks the origin's SHA256SUMS entry %s", zh)
	}
	if n := e.origin.ArchiveHits("acme", "widget", "1.0.0", host); n != 1 {
		t.Errorf("%d origin downloads of the archive, want 1", n)
	}
}
