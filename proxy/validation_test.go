package proxy

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestHostileRequestPaths sends hostile paths and methods through the
// router: each gets a 4xx JSON error and reaches no origin.
func TestHostileRequestPaths(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	long := strings.Repeat("a", 200)

	tests := []struct {
		name       string
		method     string
		path       string
		wantStatus int
	}{
		{name: "dot dot namespace", path: "/" + originHost + "/../" + typ + "/index.json", wantStatus: 400},
		{name: "dot dot file", path: providerPath(".."), wantStatus: 400},
		{name: "encoded dot dot", path: "/" + originHost + "/%2e%2e/" + typ + "/index.json", wantStatus: 400},
		{name: "encoded dot dot upper", path: "/" + originHost + "/" + ns + "/%2E%2E/index.json", wantStatus: 400},
		{name: "dot dot climbing out", path: "/" + originHost + "/" + ns + "/../../../etc/passwd", wantStatus: 404},
		{name: "single dot", path: "/" + originHost + "/./" + typ + "/index.json", wantStatus: 400},
		{name: "encoded slash in host", path: "/" + originHost + "%2F" + ns + "/" + typ + "/x/index.json", wantStatus: 400},
		{name: "encoded slash in type", path: "/" + originHost + "/" + ns + "/a%2Fb/index.json", wantStatus: 400},
		{name: "encoded slash lowercase", path: "/" + originHost + "/" + ns + "/a%2fb/index.json", wantStatus: 400},
		{name: "encoded slash in file", path: providerPath("..%2F..%2Fx.zip"), wantStatus: 400},
		{name: "double encoded slash", path: "/" + originHost + "/" + ns + "/a%252Fb/index.json", wantStatus: 400},
		{name: "encoded backslash", path: "/" + originHost + "/a%5C..%5Cb/" + typ + "/index.json", wantStatus: 400},
		{name: "empty segment", path: "/" + originHost + "//" + typ + "/index.json", wantStatus: 404},
		{name: "overlong host", path: "/" + strings.Repeat(long+".", 2) + "com/" + ns + "/" + typ + "/index.json", wantStatus: 400},
		{name: "overlong namespace", path: "/" + originHost + "/" + long + "/" + typ + "/index.json", wantStatus: 400},
		{name: "overlong version", path: providerPath("1.0.0-" + long + ".json"), wantStatus: 400},
		{name: "overlong archive name", path: providerPath("terraform-provider-" + typ + "_1.0.0_" + long + "_" + long + ".zip"), wantStatus: 400},
		{name: "uppercase host", path: "/Registry.Terraform.IO/" + ns + "/" + typ + "/index.json", wantStatus: 400},
		{name: "uppercase namespace", path: "/" + originHost + "/HashiCorp/" + typ + "/index.json", wantStatus: 400},
		{name: "raw IDN host", path: "/b%C3%BCcher.example/" + ns + "/" + typ + "/index.json", wantStatus: 400},
		{name: "punycode host not allowed", path: "/xn--bcher-kva.example/" + ns + "/" + typ + "/index.json", wantStatus: 404},
		{name: "invalid host", path: "/exa_mple..com/" + ns + "/" + typ + "/index.json", wantStatus: 400},
		{name: "host with userinfo", path: "/user@" + originHost + "/" + ns + "/" + typ + "/index.json", wantStatus: 400},
		{name: "nul in type", path: "/" + originHost + "/" + ns + "/a%00/index.json", wantStatus: 400},
		{name: "uppercase platform", path: archivePath("1.0.0", "Linux_amd64"), wantStatus: 400},
		{name: "archive of another type", path: providerPath("terraform-provider-other_1.0.0_linux_amd64.zip"), wantStatus: 400},
		{name: "post", method: http.MethodPost, path: providerPath("index.json"), wantStatus: 405},
		{name: "put", method: http.MethodPut, path: providerPath("1.0.0.json"), wantStatus: 405},
		{name: "delete", method: http.MethodDelete, path: archivePath("1.0.0", "linux_amd64"), wantStatus: 405},
		{name: "patch on unknown path", method: http.MethodPatch, path: "/foo", wantStatus: 405},
		{name: "options", method: http.MethodOptions, path: providerPath("index.json"), wantStatus: 405},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = http.MethodGet
			}
			r := h.do(context.Background(), method, tc.path)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.status != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", r.status, tc.wantStatus, r.body)
			}
			var body errorBody
			r.json(t, &body) // checks Content-Type application/json
			if len(body.Errors) != 1 || body.Errors[0] == "" {
				t.Errorf("errors %q, want one message", body.Errors)
			}
			if tc.wantStatus == 405 && r.header.Get("Allow") != "GET, HEAD" {
				t.Errorf("Allow %q, want GET, HEAD", r.header.Get("Allow"))
			}
		})
	}
	for _, kind := range []fakeorigin.Kind{fakeorigin.Discovery, fakeorigin.Versions, fakeorigin.Archive} {
		if n := h.origin.Hits(kind); n != 0 {
			t.Errorf("origin %v requests = %d, want 0", kind, n)
		}
	}
}
