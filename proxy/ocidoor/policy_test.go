package ocidoor

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/proxy"
)

// denyVersion is a policy denying version of address, with a reason.
func denyVersion(address, version string) string {
	return `deny_version "` + address + `" {
  versions = "= ` + version + `"
  reason   = "CVE-2026-0001: use another"
}
`
}

// refused checks that path answers 451 with the policy's reason, the
// OCI error code DENIED (one of the codes the distribution spec allows,
// and not one OpenTofu reads as "not here, try the next source"), and no
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
		if method == "GET" && (!strings.Contains(string(b), "CVE-2026-0001") || !strings.Contains(string(b), `"code":"DENIED"`)) {
			t.Errorf("%s %s: %s, want DENIED with the reason", method, path, b)
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

// An address the policy denies is refused on every door at once, with
// no origin request: here the origin stalls every answer for a minute,
// and each refusal must come within seconds, a 404, with the origin
// asked nothing (before, a denied provider's version list was fetched
// first, and a stalled origin made it wait and answer 504).
func TestDeniedAddressAsksNoOrigin(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.origin.AddProvider("acme", "evil", []string{"1.0.0"}, twoPlatforms)
	addTarballModule(r, map[string][]byte{"main.tf": []byte("#\n")}, "1.0.0")
	r.engine.SetPolicy(enginetest.DecodePolicy(t, `deny = ["`+originHost+`/acme/evil", "`+originHost+`/acme/net/aws"]`))
	r.origin.SetLatency(time.Minute)
	client := r.http.Client()
	client.Timeout = 10 * time.Second
	digest := "sha256:" + strings.Repeat("a", 64)
	for _, path := range []string{
		"/" + originHost + "/acme/evil/index.json",
		"/" + originHost + "/acme/evil/1.0.0.json",
		"/" + originHost + "/acme/evil/terraform-provider-evil_1.0.0_linux_amd64.zip",
		"/" + proxy.RegistryPath(originHost) + "acme/evil/versions",
		"/" + proxy.RegistryPath(originHost) + "acme/evil/1.0.0/download/linux/amd64",
		"/" + proxy.ModulesPath(originHost) + "acme/net/aws/versions",
		"/" + proxy.ModulesPath(originHost) + "acme/net/aws/1.0.0/download",
		"/v2/providers/" + originHost + "/acme/evil/tags/list",
		"/v2/providers/" + originHost + "/acme/evil/manifests/1.0.0",
		"/v2/providers/" + originHost + "/acme/evil/manifests/" + digest,
		"/v2/providers/" + originHost + "/acme/evil/blobs/" + digest,
		"/v2/modules/" + originHost + "/acme/net/aws/tags/list",
		"/v2/modules/" + originHost + "/acme/net/aws/manifests/1.0.0",
		"/v2/modules/" + originHost + "/acme/net/aws/manifests/" + digest,
		"/v2/modules/" + originHost + "/acme/net/aws/blobs/" + digest,
	} {
		start := time.Now()
		resp, err := client.Get(r.http.URL + path)
		if err != nil {
			t.Errorf("%s: %v after %v", path, err, time.Since(start).Round(time.Millisecond))
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %s, want 404", path, resp.Status)
		}
	}
	if n := r.origin.TotalHits(); n != 0 {
		t.Errorf("%d origin requests for denied addresses, want none", n)
	}
}

// maxPolicyReach is how long after a reload a shared cache in front of
// the mirror (a CDN, nginx, a corporate proxy) may still reuse a
// successful answer of a version the policy refuses since: the
// freshness of index.json and VERSION.json.
const maxPolicyReach = 60

// Every successful answer that carries a version's bytes or names it by
// digest (the network mirror's archive, the module registry's package,
// the OCI door's manifests by digest and blobs of providers and modules)
// tells a shared cache to reuse it for no longer than the documents
// (never a year, never immutable), so that a version denied on a reload
// stops being served through a cache in front within that time, as it
// stops in the version lists; revalidated after the deny, each is
// refused, not 304.
func TestPackageAnswersEndWithThePolicy(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.origin.AddProvider("acme", "net", []string{"1.0.0"}, twoPlatforms)
	addTarballModule(r, map[string][]byte{"main.tf": []byte("# net\n")}, "1.0.0")
	digests, _ := pullProvider(t, r, "acme", "net", "1.0.0", "linux_amd64", auth.EmptyCredential)
	md, _ := pullModule(t, r, "1.0.0")
	mbase := "/v2/modules/" + originHost + "/acme/net/aws"
	pbase := "/v2/providers/" + originHost + "/acme/net"
	paths := []string{
		"/" + originHost + "/acme/net/terraform-provider-net_1.0.0_linux_amd64.zip",
		"/" + proxy.ModulesPath(originHost) + "acme/net/aws/1.0.0/package.tar.gz",
		pbase + "/blobs/sha256:" + r.origin.SHA256("acme", "net", "1.0.0", "linux_amd64"),
		mbase + "/manifests/" + md,
		mbase + "/blobs/" + moduleLayer(t, r, md),
	}
	for _, d := range digests {
		paths = append(paths, pbase+"/manifests/"+d)
	}
	etags := map[string]string{}
	for _, path := range paths {
		resp := r.do("GET", path)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		etags[path] = resp.Header.Get("ETag")
		cc := resp.Header.Get("Cache-Control")
		age, ok := maxAge(cc)
		if strings.Contains(cc, "immutable") || !ok || age > maxPolicyReach {
			t.Errorf("GET %s: Cache-Control %q, want a max-age of at most %ds and not immutable: a deny on a reload must reach a cache in front", path, cc, maxPolicyReach)
		}
	}
	r.engine.SetPolicy(enginetest.DecodePolicy(t, denyVersion(originHost+"/acme/net", "1.0.0")+denyVersion(originHost+"/acme/net/aws", "1.0.0")))
	for _, path := range paths {
		resp := r.do("GET", path, "If-None-Match", etags[path])
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnavailableForLegalReasons {
			t.Errorf("GET %s revalidated after the deny: %s, want 451", path, resp.Status)
		}
	}
}

// maxAge returns the max-age directive of a Cache-Control value.
func maxAge(cc string) (int, bool) {
	for _, d := range strings.Split(cc, ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(d), "max-age="); ok {
			n, err := strconv.Atoi(v)
			return n, err == nil
		}
	}
	return 0, false
}

// A provider version the minimum release age holds is refused by the OCI
// door with Retry-After at the time it becomes available, as the other
// doors refuse it (proxy/httperr.SetRetryAfter).
func TestAgeHeldVersionRetryAfter(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.origin.AddProvider("acme", "net", []string{"1.0.0"}, twoPlatforms)
	signed := time.Now().Add(-time.Hour).Truncate(time.Second)
	r.origin.SetSignedAt("acme", "net", "1.0.0", signed)
	r.engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	path := "/v2/providers/" + originHost + "/acme/net/manifests/1.0.0"
	resp := r.do("GET", path)
	io.Copy(io.Discard, resp.Body) //nolint:errcheck // drained
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnavailableForLegalReasons {
		t.Fatalf("GET %s: %s, want 451", path, resp.Status)
	}
	at, err := http.ParseTime(resp.Header.Get("Retry-After"))
	if want := signed.Add(72 * time.Hour); err != nil || !at.Equal(want) {
		t.Errorf("GET %s: Retry-After %q, want %s", path, resp.Header.Get("Retry-After"), want.UTC().Format(http.TimeFormat))
	}
}
