package ocidoor

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/tfmirror/tfmirror/internal/enginetest"
)

// denyVersion is a policy denying version of address, with a reason.
func denyVersion(address, version string) string {
	return `deny_version "` + address + `" {
  versions = "= ` + version + `"
  reason   = "CVE-2026-0001: use another"
}
`
}

// refused checks that path answers 451 with the policy's reason and no
// immutable caching.
func refused(t *testing.T, r *rig, path string) {
	t.Helper()
	for _, method := range []string{"GET", "HEAD"} {
		resp := r.do(method, path)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnavailableForLegalReasons {
			t.Errorf("%s %s after the deny: %s %.200s, want 451", method, path, resp.Status, b)
			continue
		}
		if method == "GET" && !strings.Contains(string(b), "CVE-2026-0001") {
			t.Errorf("%s %s: %s, want the reason", method, path, b)
		}
		if cc := resp.Header.Get("Cache-Control"); strings.Contains(cc, "immutable") {
			t.Errorf("%s %s: Cache-Control %q on a refusal", method, path, cc)
		}
	}
}

// A module version pulled before a deny_version is refused after it by
// every OCI way in: its manifest by tag, by digest, and its zip blob,
// though its zip record and blob stay in the cache.
func TestDeniedModuleVersionRefusedByOCI(t *testing.T) {
	r := newRig(t, rigOptions{})
	addTarballModule(r, map[string][]byte{"main.tf": []byte("# net\n")}, "1.0.0", "1.1.0")
	d, _ := pullModule(t, r, "1.0.0")
	layer := moduleLayer(t, r, d)
	r.engine.SetPolicy(enginetest.DecodePolicy(t, denyVersion(originHost+"/acme/net/aws", "1.0.0")))
	base := "/v2/modules/" + originHost + "/acme/net/aws"
	refused(t, r, base+"/manifests/1.0.0")
	refused(t, r, base+"/manifests/"+d)
	refused(t, r, base+"/blobs/"+layer)
	// The other version is still served, its zip too, though 1.0.0 has
	// the same files and so the same zip digest.
	pullModule(t, r, "1.1.0")
}

// moduleLayer returns the zip layer's digest of module manifest d.
func moduleLayer(t *testing.T, r *rig, d string) string {
	t.Helper()
	resp := r.do("GET", "/v2/modules/"+originHost+"/acme/net/aws/manifests/"+d)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	i := strings.Index(string(b), `"layers":[{`)
	j := strings.Index(string(b)[i:], `"digest":"`)
	if i < 0 || j < 0 {
		t.Fatalf("manifest %s", b)
	}
	rest := string(b)[i+j+len(`"digest":"`):]
	return rest[:strings.IndexByte(rest, '"')]
}

// A provider version pulled before a deny_version is refused after it:
// its index by tag and by digest, each platform's manifest by digest
// (never with Cache-Control immutable), and its zip.
func TestDeniedProviderVersionRefusedByOCI(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.origin.AddProvider("acme", "net", []string{"1.0.0", "1.1.0"}, twoPlatforms)
	digests, _ := pullProvider(t, r, "acme", "net", "1.0.0", "linux_amd64", auth.EmptyCredential)
	layer := "sha256:" + r.origin.SHA256("acme", "net", "1.0.0", "linux_amd64")
	r.engine.SetPolicy(enginetest.DecodePolicy(t, denyVersion(originHost+"/acme/net", "1.0.0")))
	base := "/v2/providers/" + originHost + "/acme/net"
	refused(t, r, base+"/manifests/1.0.0")
	for _, d := range digests {
		refused(t, r, base+"/manifests/"+d)
	}
	refused(t, r, base+"/blobs/"+layer)
	pullProvider(t, r, "acme", "net", "1.1.0", "linux_amd64", auth.EmptyCredential)
}
