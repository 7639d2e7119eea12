package ocidoor

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	digest "github.com/opencontainers/go-digest"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/oci"
	"github.com/tfmirror/tfmirror/v2/policy"
	"github.com/tfmirror/tfmirror/v2/proxy"
)

// countingProviders counts the documents asked of the engine.
type countingProviders struct {
	Providers
	asked atomic.Int64
}

func (c *countingProviders) IndexAnswer(ctx context.Context, p addrs.Provider, v versions.Version) (oci.Document, func() bool, error) {
	c.asked.Add(1)
	return c.Providers.IndexAnswer(ctx, p, v)
}

func (c *countingProviders) ManifestAnswer(ctx context.Context, p addrs.Provider, d digest.Digest) (oci.Document, func() bool, error) {
	c.asked.Add(1)
	return c.Providers.ManifestAnswer(ctx, p, d)
}

// A warm manifest, by tag or by digest, is answered from the answer kept
// for its path, asking the engine nothing; a new package policy ends every
// answer kept, so that the policy applies to the next request (the tag
// held back), and so does the policy lifted.
func TestWarmManifestKeptUntilTheEngineChanges(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.origin.AddProvider("acme", "net", []string{"1.0.0"}, twoPlatforms)
	counting := &countingProviders{Providers: r.pkgs}
	door, err := New(Config{Names: r.names}, counting)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		door.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		return w
	}
	tag := "/v2/providers/" + originHost + "/acme/net/manifests/1.0.0"
	first := get(tag)
	if first.Code != http.StatusOK {
		t.Fatalf("tag: %d %s", first.Code, first.Body)
	}
	byDigest := "/v2/providers/" + originHost + "/acme/net/manifests/" + first.Header().Get("Docker-Content-Digest")
	if w := get(byDigest); w.Code != http.StatusOK {
		t.Fatalf("digest: %d %s", w.Code, w.Body)
	}
	// The first answer needed the origin, and is not kept: the next one,
	// from the cache, is.
	get(tag)
	asked := counting.asked.Load()
	for _, path := range []string{tag, byDigest, tag, byDigest} {
		w := get(path)
		if w.Code != http.StatusOK || w.Body.String() != first.Body.String() ||
			w.Header().Get("Content-Type") != oci.MediaTypeIndex || w.Header().Get("Content-Length") != first.Header().Get("Content-Length") {
			t.Fatalf("warm %s: %d %q %v", path, w.Code, w.Body, w.Header())
		}
	}
	if got := counting.asked.Load(); got != asked {
		t.Errorf("warm manifests asked the engine %d times, want none", got-asked)
	}
	if w := get(tag); w.Header().Get("Cache-Control") != "no-cache" {
		t.Errorf("warm tag Cache-Control %q, want no-cache", w.Header().Get("Cache-Control"))
	}
	if w := get(byDigest); w.Header().Get("Cache-Control") != proxy.PackageCacheControl {
		t.Errorf("warm digest Cache-Control %q, want %q", w.Header().Get("Cache-Control"), proxy.PackageCacheControl)
	}

	src := `deny_version "` + originHost + `/acme/net" {
  versions = "1.0.0"
  reason   = "withdrawn"
}
`
	f, diags := hclsyntax.ParseConfig([]byte(src), "policy.hcl", hcl.Pos{Line: 1, Column: 1})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	pol, diags := policy.Decode(f.Body)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	r.engine.SetPolicy(pol)
	asked = counting.asked.Load()
	if w := get(tag); w.Code == http.StatusOK {
		t.Errorf("the tag of a version the new policy holds back answered from what was kept: %d", w.Code)
	}
	if counting.asked.Load() == asked {
		t.Error("after a new policy, the tag was not asked of the engine")
	}
	r.engine.SetPolicy(nil)
	if w := get(tag); w.Code != http.StatusOK || w.Body.String() != first.Body.String() {
		t.Errorf("policy lifted: %d %s", w.Code, w.Body)
	}
}
