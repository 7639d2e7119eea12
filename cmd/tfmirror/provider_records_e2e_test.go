package main

import (
	"net/http"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// randomOnePlatforms is the origin's hashicorp/random 1.0.0 for the
// platform terraform runs on and another.
func randomOnePlatforms(e *e2e, more ...string) map[string]string {
	e.origin.AddProvider("hashicorp", "random", []string{"1.0.0"}, append([]string{"linux_amd64", "darwin_arm64"}, more...))
	return map[string]string{"random": "hashicorp/random@1.0.0"}
}

// A platform the origin adds to a version the mirror has cached (its
// SHA256SUMS signed again, now naming it) leaves the version installable
// through the network mirror, as it is directly: the mirror checked the
// new platform against the document it had stored, which lacks its line,
// and answered 502 for the whole version, the cached platforms too,
// for good.
func TestPlatformAddedByTheOriginThroughTheNetworkMirror(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{SeparateDownloadHost: true}, "--versions-ttl", "1ns")
	providers := randomOnePlatforms(e)
	if out, err := e.terraform(writeConfig(t, providers), "init", "-no-color"); err != nil {
		t.Fatalf("init before: %v\n%s", err, out)
	}
	randomOnePlatforms(e, "windows_amd64")
	if out, err := e.terraform(writeConfig(t, providers), "init", "-no-color"); err != nil {
		t.Errorf("init after the origin added windows_amd64: %v\n%s", err, out)
	}
}

// After the origin rotates its signing key, re-signing the version's
// SHA256SUMS with the new key that its download answers give, a platform
// not cached before is installed through the mirror as it is directly:
// the mirror checked the stored document, signed with the old key,
// against the new one, and refused it as badly signed, for good.
func TestSigningKeyRotatedByTheOrigin(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{SeparateDownloadHost: true})
	providers := randomOnePlatforms(e)
	throughMirror(t, e, "").init(t, providers) // this platform's package metadata only
	e.origin.SetWrongSigningKey(true)
	e.origin.SetSigningKeys(e.origin.ArmoredPublicKeyB())
	direct(t, e).init(t, providers)
	if out, err := e.terraform(writeConfig(t, providers), "init", "-no-color"); err != nil {
		t.Errorf("init through the network mirror after the key rotation: %v\n%s", err, out)
	}
}

// A version installed through the registry protocol (which caches the
// package metadata of the platform asked for only) is installed through
// the network mirror with the origin down, and on a sealed mirror, from
// the platforms cached: VERSION.json answered 503 for want of the other
// platforms, though the archive was served and a sealed index.json
// listed the version.
func TestCachedPlatformInstalledThroughTheNetworkMirrorUnasked(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{SeparateDownloadHost: true})
	providers := randomOnePlatforms(e)
	throughMirror(t, e, "").init(t, providers)
	e.origin.SetDown(http.StatusServiceUnavailable)
	if out, err := e.terraform(writeConfig(t, providers), "init", "-no-color"); err != nil {
		t.Errorf("init through the network mirror, the origin down: %v\n%s", err, out)
	}
	e.stop()
	e.startMirror(e.dataDir, "--offline")
	if out, err := e.terraformWith(writeConfig(t, providers), networkMirror(t, e.url), e.caFile, "init", "-no-color"); err != nil {
		t.Errorf("init through the network mirror of a sealed mirror: %v\n%s", err, out)
	}
}
