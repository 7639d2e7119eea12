package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestHeadAgreesWithGet: through the serve's wiring, every path of the
// main listener that answers GET answers HEAD with the same status and
// the same headers a client or a cache reads (Content-Type,
// Content-Length, ETag, Cache-Control), and no body. HEAD /metrics was
// answered 405 with an Allow naming HEAD, where the metrics listener
// answered it.
func TestHeadAgreesWithGet(t *testing.T) {
	t.Parallel()
	origin := newOrigin(t, fakeorigin.Options{})
	origin.AddProvider("hashicorp", "random", []string{"1.0.0"}, []string{"linux_amd64"})
	tm := startMirror(t, origin, t.TempDir(), nil, "--insecure-http")
	archive := tfRegistry + "/hashicorp/random/terraform-provider-random_1.0.0_linux_amd64.zip"
	if resp, _, err := tm.get(archive); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("archive: %v %v", resp, err)
	}
	tm.idle()
	for _, path := range []string{
		"/", "/healthz", "/readyz", "/metrics",
		tfRegistry + "/hashicorp/random/index.json",
		tfRegistry + "/hashicorp/random/1.0.0.json",
		archive,
		"/registry/" + tfRegistry + "/v1/providers/hashicorp/random/versions",
		"/v2/",
		"/v2/providers/" + tfRegistry + "/hashicorp/random/tags/list",
	} {
		get, _, err := tm.get(path)
		if err != nil || get.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %v, %v; want 200", path, get, err)
			continue
		}
		req, err := http.NewRequest(http.MethodHead, tm.url+strings.TrimPrefix(path, "/"), nil)
		if err != nil {
			t.Fatal(err)
		}
		head, err := tm.client.Do(req)
		if err != nil {
			t.Errorf("HEAD %s: %v", path, err)
			continue
		}
		head.Body.Close()
		if head.StatusCode != get.StatusCode {
			t.Errorf("HEAD %s: status %d (Allow %q), GET %d", path, head.StatusCode, head.Header.Get("Allow"), get.StatusCode)
			continue
		}
		for _, h := range []string{"Content-Type", "Content-Length", "Etag", "Cache-Control"} {
			if g, hd := get.Header.Get(h), head.Header.Get(h); g != hd {
				t.Errorf("%s %s: HEAD %q, GET %q", path, h, hd, g)
			}
		}
	}
}
