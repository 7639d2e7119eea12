package ocidoor

import (
	"encoding/json"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/mirror/served"
	"github.com/tfmirror/tfmirror/v2/policy"
	"github.com/tfmirror/tfmirror/v2/proxy"
)

// checkCounter is the engine below the package policy's layer,
// counting what the layer asks of it for each request: whether the
// provider's host is served, and whether the policy's address rules let
// the provider through.
type checkCounter struct {
	*mirror.Engine
	origin, address atomic.Int64
}

func (c *checkCounter) CheckOrigin(p addrs.Provider) error {
	c.origin.Add(1)
	return c.Engine.CheckOrigin(p)
}

func (c *checkCounter) CheckAddress(kind policy.Kind, address string) error {
	c.address.Add(1)
	return c.Engine.CheckAddress(kind, address)
}

// Every provider request of every front door (the network mirror, the
// provider registry, the OCI door) is checked once, by the package
// policy's layer: its host and its address are each asked about once,
// whether it is answered, refused by the policy or refused for its host;
// no door asks before the layer does. A request the door cannot parse
// is refused before anything is asked.
func TestEveryProviderRequestCheckedOnce(t *testing.T) {
	var below *checkCounter
	r := newRig(t, rigOptions{providers: func(e *mirror.Engine) served.Providers {
		below = &checkCounter{Engine: e}
		return below
	}})
	r.origin.AddProvider("acme", "net", []string{"1.0.0", "1.1.0"}, twoPlatforms)
	r.origin.AddProvider("acme", "evil", []string{"1.0.0"}, twoPlatforms)
	r.engine.SetPolicy(enginetest.DecodePolicy(t, `deny = ["`+originHost+`/acme/evil"]
`+denyVersion(originHost+"/acme/net", "1.1.0")))

	mirrorBase := "/" + originHost + "/acme/net/"
	registryBase := "/" + proxy.RegistryPath(originHost) + "acme/net/"
	ociBase := "/v2/providers/" + originHost + "/acme/net/"
	// check sends one request and wants status, with the host asked about
	// once and the address asked about address times; it returns the body.
	check := func(path string, status int, address int64) []byte {
		t.Helper()
		below.origin.Store(0)
		below.address.Store(0)
		resp := r.do(http.MethodGet, path)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != status {
			t.Fatalf("GET %s: %s %.200s, want %d", path, resp.Status, body, status)
		}
		origin := int64(1)
		if status == http.StatusBadRequest {
			origin = 0
		}
		if o, a := below.origin.Load(), below.address.Load(); o != origin || a != address {
			t.Errorf("GET %s: host asked about %d times, address %d times; want %d and %d", path, o, a, origin, address)
		}
		return body
	}

	check(mirrorBase+"index.json", 200, 1)
	check(mirrorBase+"1.0.0.json", 200, 1)
	check(mirrorBase+"terraform-provider-net_1.0.0_linux_amd64.zip", 200, 1)
	check(registryBase+"versions", 200, 1)
	check(registryBase+"1.0.0/download/linux/amd64", 200, 1)
	check(registryBase+"1.0.0/download/linux/amd64/SHA256SUMS", 200, 1)
	check(ociBase+"tags/list", 200, 1)
	var index struct {
		Manifests []struct {
			Digest string `json:"digest"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(check(ociBase+"manifests/1.0.0", 200, 1), &index); err != nil || len(index.Manifests) == 0 {
		t.Fatalf("image index: %v %+v", err, index)
	}
	var manifest struct {
		Config struct{ Digest string }   `json:"config"`
		Layers []struct{ Digest string } `json:"layers"`
	}
	if err := json.Unmarshal(check(ociBase+"manifests/"+index.Manifests[0].Digest, 200, 1), &manifest); err != nil || len(manifest.Layers) != 1 {
		t.Fatalf("platform manifest: %v %+v", err, manifest)
	}
	check(ociBase+"blobs/"+manifest.Layers[0].Digest, 200, 1)
	check(ociBase+"blobs/"+manifest.Config.Digest, 200, 1)
	check(ociBase+"referrers/"+index.Manifests[0].Digest, 200, 1)

	// Refused by the policy: a denied version, a denied address.
	check(mirrorBase+"terraform-provider-net_1.1.0_linux_amd64.zip", http.StatusUnavailableForLegalReasons, 1)
	check(ociBase+"manifests/1.1.0", http.StatusUnavailableForLegalReasons, 1)
	evil := "/" + originHost + "/acme/evil/"
	check(evil+"terraform-provider-evil_1.0.0_linux_amd64.zip", 404, 1)
	check("/"+proxy.RegistryPath(originHost)+"acme/evil/1.0.0/download/linux/amd64", 404, 1)
	check("/v2/providers/"+originHost+"/acme/evil/manifests/1.0.0", 404, 1)
	check("/v2/providers/"+originHost+"/acme/evil/blobs/"+manifest.Config.Digest, 404, 1)
	// A host not served: the address is not asked about.
	check("/registry.example.org/acme/net/1.0.0.json", 404, 0)
	check("/v2/providers/registry.example.org/acme/net/manifests/1.0.0", 404, 0)
	// Malformed: refused by the door, nothing asked.
	check(evil+"1.0.json", http.StatusBadRequest, 0)
	check("/v2/providers/"+originHost+"/acme/evil/blobs/sha256:zz", http.StatusBadRequest, 0)
}

// moduleCheckCounter is the engine's modules below the package policy's
// layer, counting how often the layer asks whether a module's host is
// served (the address rules it asks of the providers' stand-in).
type moduleCheckCounter struct {
	*modules.Modules
	origin atomic.Int64
}

func (c *moduleCheckCounter) CheckModuleOrigin(m addrs.Module) error {
	c.origin.Add(1)
	return c.Modules.CheckModuleOrigin(m)
}

// Every module request of the module registry door and of the OCI door
// is checked once, by the package policy's layer: its host and its
// address are each asked about once, whether it is answered, refused by
// the policy or refused for its host, and a refusal asks the origin
// nothing; no door asks before the layer does, and the answers the OCI
// door makes without another call (the empty config blob, referrers)
// ask it too. A host not served is asked about its host only; a request
// the door cannot parse is refused before anything is asked (a denied
// module with a malformed version is a bad request).
func TestEveryModuleRequestCheckedOnce(t *testing.T) {
	var below *checkCounter
	var mods *moduleCheckCounter
	r := newRig(t, rigOptions{
		providers: func(e *mirror.Engine) served.Providers {
			below = &checkCounter{Engine: e}
			return below
		},
		modules: func(m *modules.Modules) served.Modules {
			mods = &moduleCheckCounter{Modules: m}
			return mods
		},
	})
	addTarballModule(r, map[string][]byte{"main.tf": []byte("# net\n")}, "v1.0.0", "1.1.0")
	r.origin.AddTarball("evil.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# evil\n")}))
	r.origin.AddModule("acme", "evil", "aws", "1.0.0", r.origin.TarballURL("evil.tar.gz"))
	r.engine.SetPolicy(enginetest.DecodePolicy(t, `deny = ["`+originHost+`/acme/evil/aws"]
`+denyVersion(originHost+"/acme/net/aws", "1.1.0")))

	registryBase := "/" + proxy.ModulesPath(originHost) + "acme/net/aws/"
	ociBase := "/v2/modules/" + originHost + "/acme/net/aws/"
	// check sends one request and wants status, with the host asked about
	// host times and the address address times; a refusal must ask the
	// origin nothing. It returns the body.
	check := func(path string, status int, host, address int64) []byte {
		t.Helper()
		below.origin.Store(0)
		below.address.Store(0)
		mods.origin.Store(0)
		before := r.origin.TotalHits()
		resp := r.do(http.MethodGet, path)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != status {
			t.Fatalf("GET %s: %s %.200s, want %d", path, resp.Status, body, status)
		}
		if o, a := mods.origin.Load(), below.address.Load(); o != host || a != address {
			t.Errorf("GET %s: host asked about %d times, address %d times; want %d and %d", path, o, a, host, address)
		}
		if n := below.origin.Load(); n != 0 {
			t.Errorf("GET %s: a provider's host asked about %d times", path, n)
		}
		if n := r.origin.TotalHits() - before; status != 200 && n != 0 {
			t.Errorf("GET %s: refused with %d origin requests, want none", path, n)
		}
		return body
	}

	check(registryBase+"versions", 200, 1, 1)
	check(registryBase+"1.0.0/download", 200, 1, 1)
	check(registryBase+"v1.0.0/download", 200, 1, 1)
	check(registryBase+"1.0.0/package.tar.gz", 200, 1, 1)
	check(ociBase+"tags/list", 200, 1, 1)
	var manifest struct {
		Config struct{ Digest string }   `json:"config"`
		Layers []struct{ Digest string } `json:"layers"`
	}
	if err := json.Unmarshal(check(ociBase+"manifests/1.0.0", 200, 1, 1), &manifest); err != nil || len(manifest.Layers) != 1 {
		t.Fatalf("module manifest: %v %+v", err, manifest)
	}
	resp := r.do(http.MethodGet, ociBase+"manifests/1.0.0")
	resp.Body.Close()
	manifestDigest := resp.Header.Get("Docker-Content-Digest")
	check(ociBase+"manifests/"+manifestDigest, 200, 1, 1)
	check(ociBase+"blobs/"+manifest.Layers[0].Digest, 200, 1, 1)
	check(ociBase+"blobs/"+manifest.Config.Digest, 200, 1, 1)
	check(ociBase+"referrers/"+manifestDigest, 200, 1, 1)

	// Refused by the policy: a denied version, a denied address.
	check(registryBase+"1.1.0/download", http.StatusUnavailableForLegalReasons, 1, 1)
	check(registryBase+"1.1.0/package.tar.gz", http.StatusUnavailableForLegalReasons, 1, 1)
	check(ociBase+"manifests/v1.1.0", http.StatusUnavailableForLegalReasons, 1, 1)
	evilRegistry := "/" + proxy.ModulesPath(originHost) + "acme/evil/aws/"
	evilOCI := "/v2/modules/" + originHost + "/acme/evil/aws/"
	check(evilRegistry+"versions", 404, 1, 1)
	check(evilRegistry+"1.0.0/download", 404, 1, 1)
	check(evilRegistry+"1.0.0/package.tar.gz", 404, 1, 1)
	check(evilOCI+"tags/list", 404, 1, 1)
	check(evilOCI+"manifests/1.0.0", 404, 1, 1)
	check(evilOCI+"manifests/"+manifestDigest, 404, 1, 1)
	check(evilOCI+"blobs/"+manifest.Layers[0].Digest, 404, 1, 1)
	check(evilOCI+"blobs/"+manifest.Config.Digest, 404, 1, 1)
	check(evilOCI+"referrers/"+manifestDigest, 404, 1, 1)
	// A host not served: the address is not asked about.
	check("/"+proxy.ModulesPath("registry.example.org")+"acme/net/aws/versions", 404, 1, 0)
	check("/"+proxy.ModulesPath("registry.example.org")+"acme/net/aws/1.0.0/download", 404, 1, 0)
	check("/v2/modules/registry.example.org/acme/net/aws/tags/list", 404, 1, 0)
	check("/v2/modules/registry.example.org/acme/net/aws/manifests/1.0.0", 404, 1, 0)
	check("/v2/modules/registry.example.org/acme/net/aws/blobs/"+manifest.Config.Digest, 404, 1, 0)
	check("/v2/modules/registry.example.org/acme/net/aws/referrers/"+manifestDigest, 404, 1, 0)
	// Malformed: refused by the door, nothing asked.
	check(evilRegistry+"1.0.0-/download", http.StatusBadRequest, 0, 0)
	check(evilRegistry+"not-a-version/package.tar.gz", http.StatusBadRequest, 0, 0)
	check(evilOCI+"blobs/sha256:zz", http.StatusBadRequest, 0, 0)
	check(evilOCI+"manifests/sha256:zz", http.StatusBadRequest, 0, 0)
	check(evilOCI+"referrers/sha256:zz", http.StatusBadRequest, 0, 0)
}
