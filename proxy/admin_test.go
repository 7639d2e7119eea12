package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type countingSync struct{ outcomes map[string]int }

func (c *countingSync) Synced(outcome string, _ int64) { c.outcomes[outcome]++ }

func (c *countingSync) AirGap(op string, packages map[string]int, bytes int64) {
	for outcome, n := range packages {
		c.outcomes[op+" "+outcome] += n
	}
	c.outcomes[op+" bytes"] += int(bytes)
}

// TestAdminHandler: the admin API answers through the engine, maps errors
// with statusOf and counts what sync asked for.
func TestAdminHandler(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider("hashicorp", "random", []string{"3.5.0", "3.6.0"}, []string{"linux_amd64", "darwin_arm64"})
	met := &countingSync{outcomes: map[string]int{}}
	srv := httptest.NewServer(NewAdmin(h.engine, nil, met, AdminOptions{}).Handler())
	defer srv.Close()
	post := func(path, body string) (int, []byte) {
		t.Helper()
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	const random = `"provider":"registry.terraform.io/hashicorp/random"`

	status, body := post("/v1/versions", "{"+random+"}")
	var vs []AdminVersion
	if status != 200 || json.Unmarshal(body, &vs) != nil || len(vs) != 2 {
		t.Fatalf("versions: %d %s", status, body)
	}

	status, body = post("/v1/package", "{"+random+`,"version":"3.6.0"}`)
	var arcs []AdminArchive
	if status != 200 || json.Unmarshal(body, &arcs) != nil || len(arcs) != 2 || arcs[0].Cached {
		t.Fatalf("package (every platform, none cached): %d %s", status, body)
	}

	var first, second AdminEnsured
	for _, res := range []*AdminEnsured{&first, &second} {
		status, body = post("/v1/ensure", "{"+random+`,"version":"3.6.0","platform":"linux_amd64"}`)
		if status != 200 || json.Unmarshal(body, res) != nil {
			t.Fatalf("ensure: %d %s", status, body)
		}
	}
	data := h.origin.Archive("hashicorp", "random", "3.6.0", "linux_amd64")
	if first.CachedAlready || first.Bytes != int64(len(data)) || first.SHA256 != h.origin.SHA256("hashicorp", "random", "3.6.0", "linux_amd64") {
		t.Errorf("first ensure = %+v, want a fetch of %d bytes", first, len(data))
	}
	if !second.CachedAlready || second.Source != "hit" {
		t.Errorf("second ensure = %+v, want cached already", second)
	}
	if n := h.origin.Hits("archive"); n != 1 {
		t.Errorf("origin archive requests = %d, want 1", n)
	}

	for _, tc := range []struct {
		name, path, body string
		status           int
		msg              string
	}{
		{"unknown provider", "/v1/versions", `{"provider":"registry.terraform.io/acme/none"}`, 404, "not found"},
		{"unknown version", "/v1/ensure", "{" + random + `,"version":"9.9.9","platform":"linux_amd64"}`, 404, "version not found"},
		{"unpublished platform", "/v1/ensure", "{" + random + `,"version":"3.6.0","platform":"windows_amd64"}`, 404, "no package for windows_amd64"},
		{"origin not allowed", "/v1/versions", `{"provider":"evil.example.com/a/b"}`, 404, "not allowed"},
		{"bad address", "/v1/versions", `{"provider":"random"}`, 400, "want HOST/NAMESPACE/TYPE"},
		{"bad version", "/v1/ensure", "{" + random + `,"version":"x","platform":"linux_amd64"}`, 400, `version "x"`},
		{"bad json", "/v1/versions", `{`, 400, "request body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(tc.path, tc.body)
			err := DecodeAdminError(status, body)
			var ce *AdminCallError
			if status != tc.status || !errors.As(err, &ce) || !strings.Contains(ce.Msg, tc.msg) {
				t.Errorf("%d %s, want %d with %q", status, bytes.TrimSpace(body), tc.status, tc.msg)
			}
		})
	}
	if met.outcomes["fetched"] != 1 || met.outcomes["cached"] != 1 || met.outcomes["failed"] != 3 {
		t.Errorf("sync metrics = %v, want 1 fetched, 1 cached, 3 failed", met.outcomes)
	}
}
