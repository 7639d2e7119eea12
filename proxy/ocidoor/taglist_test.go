package ocidoor

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/mirror"
)

// A tag list names the versions the policy lets through, which OpenTofu
// picks a version from; a cache in front of the mirror (a CDN that keeps
// an answer without Cache-Control for its default time, a day on some)
// may reuse it no longer than the network mirror's index.json, so that a
// deny on a reload takes the version out of the list there too, and
// OpenTofu does not pick a version every later request of it refuses.
func TestTagListEndsWithThePolicy(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.origin.AddProvider("acme", "net", []string{"1.0.0", "1.1.0"}, twoPlatforms)
	addTarballModule(r, map[string][]byte{"main.tf": []byte("# net\n")}, "1.0.0", "1.1.0")
	paths := []string{
		"/v2/providers/" + originHost + "/acme/net/tags/list",
		"/v2/modules/" + originHost + "/acme/net/aws/tags/list",
	}
	tags := func(path string) ([]string, string) {
		t.Helper()
		resp := r.do("GET", path)
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		var list tagList
		if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
			t.Fatal(err)
		}
		return list.Tags, resp.Header.Get("Cache-Control")
	}
	for _, path := range paths {
		got, cc := tags(path)
		if !slices.Contains(got, "1.1.0") {
			t.Fatalf("GET %s: tags %v, want 1.1.0", path, got)
		}
		if age, ok := maxAge(cc); !strings.Contains(cc, "no-cache") && !strings.Contains(cc, "no-store") && (!ok || age > maxPolicyReach) {
			t.Errorf("GET %s: Cache-Control %q, want a max-age of at most %ds (or no-cache): a deny on a reload must reach a cache in front", path, cc, maxPolicyReach)
		}
	}
	r.engine.SetPolicy(enginetest.DecodePolicy(t, denyVersion(originHost+"/acme/net", "1.1.0")+denyVersion(originHost+"/acme/net/aws", "1.1.0")))
	for _, path := range paths {
		if got, _ := tags(path); slices.Contains(got, "1.1.0") {
			t.Errorf("GET %s after the deny: tags %v, want 1.1.0 left out", path, got)
		}
	}
}

// A tag list served from a version list the origin could not refresh is
// marked stale as every other door's version list is (X-Tfmirror-Stale,
// Warning) and may be kept by a cache in front but not reused unchecked
// (no-cache): when the origin is back, the versions it published since
// reach OpenTofu at the next request, not a minute later.
func TestStaleTagListMustBeRevalidated(t *testing.T) {
	r := newRig(t, rigOptions{engine: mirror.Config{VersionsTTL: 1}}) // every request refreshes
	r.origin.AddProvider("acme", "net", []string{"1.0.0"}, twoPlatforms)
	addTarballModule(r, map[string][]byte{"main.tf": []byte("# net\n")}, "1.0.0")
	paths := []string{
		"/v2/providers/" + originHost + "/acme/net/tags/list",
		"/v2/modules/" + originHost + "/acme/net/aws/tags/list",
	}
	for _, path := range paths {
		resp := r.do("GET", path)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Tfmirror-Stale") != "" {
			t.Fatalf("GET %s: %s, stale %q", path, resp.Status, resp.Header.Get("X-Tfmirror-Stale"))
		}
	}
	r.origin.SetDown(http.StatusServiceUnavailable)
	for _, path := range paths {
		for _, method := range []string{"GET", "HEAD"} {
			resp := r.do(method, path)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s %s with the origin down: %s, want the cached list", method, path, resp.Status)
			}
			if resp.Header.Get("X-Tfmirror-Stale") != "1" || !strings.Contains(resp.Header.Get("Cache-Control"), "no-cache") || resp.Header.Get("Warning") == "" {
				t.Errorf("%s %s with the origin down: X-Tfmirror-Stale %q, Cache-Control %q, Warning %q; want 1, no-cache and a Warning",
					method, path, resp.Header.Get("X-Tfmirror-Stale"), resp.Header.Get("Cache-Control"), resp.Header.Get("Warning"))
			}
		}
	}
}
