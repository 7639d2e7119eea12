package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/airgap"
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
	_, post := socket(t, h.newAPI(t, nil, met, Options{}))
	const random = `"provider":"registry.terraform.io/hashicorp/random"`

	status, body := post("/v1/versions", "{"+random+"}")
	var vs []Version
	if status != 200 || json.Unmarshal(body, &vs) != nil || len(vs) != 2 {
		t.Fatalf("versions: %d %s", status, body)
	}

	status, body = post("/v1/package", "{"+random+`,"version":"3.6.0"}`)
	var arcs []Archive
	if status != 200 || json.Unmarshal(body, &arcs) != nil || len(arcs) != 2 || arcs[0].Cached {
		t.Fatalf("package (every platform, none cached): %d %s", status, body)
	}

	var first, second Ensured
	for _, res := range []*Ensured{&first, &second} {
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
		{"bad address", "/v1/versions", `{"provider":"random"}`, 400, "want [HOST/]NAMESPACE/TYPE"},
		{"bad version", "/v1/ensure", "{" + random + `,"version":"x","platform":"linux_amd64"}`, 400, `version "x"`},
		{"bad json", "/v1/versions", `{`, 400, "request body"},
		// A field this release does not know is a caller of another
		// release: refused, not acted on without it.
		{"unknown field", "/v1/versions", `{"provider":"registry.terraform.io/hashicorp/random","keep_latest":3}`, 400, `unknown field "keep_latest"`},
		{"trailing data", "/v1/versions", `{"provider":"registry.terraform.io/hashicorp/random"} {}`, 400, "request body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(tc.path, tc.body)
			err := DecodeError(status, body)
			var ce *CallError
			if status != tc.status || !errors.As(err, &ce) || !strings.Contains(ce.Msg, tc.msg) {
				t.Errorf("%d %s, want %d with %q", status, bytes.TrimSpace(body), tc.status, tc.msg)
			}
		})
	}
	if met.outcomes["fetched"] != 1 || met.outcomes["cached"] != 1 || met.outcomes["failed"] != 3 {
		t.Errorf("sync metrics = %v, want 1 fetched, 1 cached, 3 failed", met.outcomes)
	}
}

// TestAdminExportImport: the admin API's export writes what the engine
// holds, its import loads that into another engine, each counted, and
// both refuse relative paths (the serving process's working directory is
// not the caller's).
func TestAdminExportImport(t *testing.T) {
	from := newHarness(t, harnessOptions{})
	from.origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64", "darwin_arm64"})
	to := newHarness(t, harnessOptions{})
	met := &countingSync{outcomes: map[string]int{}}
	post := func(a *API, path string, req any) (int, []byte) {
		t.Helper()
		_, post := socket(t, a)
		body, _ := json.Marshal(req)
		return post(path, string(body))
	}
	key, trusted := exportKeyPair(t)
	src := from.newAPI(t, nil, met, Options{ExportKey: func() (*airgap.ExportKey, error) { return key, nil }})
	if _, err := src.Ensure(context.Background(), addrs.Provider{Hostname: "registry.terraform.io", Namespace: "hashicorp", Type: "random"}, "3.6.0", "linux_amd64"); err != nil {
		t.Fatal(err)
	}
	size := int64(len(from.origin.Archive("hashicorp", "random", "3.6.0", "linux_amd64")))

	out := filepath.Join(t.TempDir(), "export")
	status, body := post(src, "/v1/export", ExportRequest{Out: out})
	var exp Exported
	if status != 200 || json.Unmarshal(body, &exp) != nil || exp.Written != 1 || exp.Bytes != size || exp.Failed != 0 || exp.Signer != key.Fingerprint() {
		t.Fatalf("export: %d %s, want 1 package of %d bytes written", status, body, size)
	}
	if _, err := os.Stat(filepath.Join(out, "registry.terraform.io", "hashicorp", "random", "terraform-provider-random_3.6.0_linux_amd64.zip")); err != nil {
		t.Errorf("export did not write the archive: %v", err)
	}

	// The importing side trusts the exporter's key: its own setting,
	// which no request can change.
	dst := to.newAPI(t, nil, met, Options{ScratchDir: t.TempDir(), Trust: airgap.Trust{ExportKeys: trusted}})
	status, body = post(dst, "/v1/import", ImportRequest{In: out})
	var imp Imported
	if status != 200 || json.Unmarshal(body, &imp) != nil || imp.Imported != 1 || imp.Bytes != size || imp.Failed != 0 {
		t.Fatalf("import: %d %s, want 1 package of %d bytes imported", status, body, size)
	}
	if got, ok := to.engine.CachedSize(from.origin.SHA256("hashicorp", "random", "3.6.0", "linux_amd64")); !ok || got != size {
		t.Errorf("imported archive cached: %v, %d bytes; want %d", ok, got, size)
	}
	want := map[string]int{"export exported": 1, "export present": 0, "export failed": 0, "export bytes": int(size),
		"import imported": 1, "import present": 0, "import failed": 0, "import bytes": int(size), "fetched": 1}
	for k, v := range want {
		if met.outcomes[k] != v {
			t.Errorf("metrics %q = %d, want %d (all: %v)", k, met.outcomes[k], v, met.outcomes)
		}
	}

	for _, tc := range []struct {
		path string
		req  any
		msg  string
	}{
		{"/v1/export", ExportRequest{Out: "export"}, "want an absolute path"},
		{"/v1/import", ImportRequest{In: "export"}, "want an absolute path"},
		{"/v1/export", ExportRequest{Out: out, Platforms: []string{"linux"}}, "linux"},
	} {
		status, body := post(dst, tc.path, tc.req)
		if status != 400 || !strings.Contains(string(body), tc.msg) {
			t.Errorf("%s %+v: %d %s, want 400 with %q", tc.path, tc.req, status, body, tc.msg)
		}
	}
}

// TestImportTrustsTrustNow: with Options.TrustNow, an import trusts the
// keys it gives when the import starts (the serving process's keys as its
// last reload read them), not Options.Trust: a key it no longer gives is
// not trusted, one it gives now is.
func TestImportTrustsTrustNow(t *testing.T) {
	from := newHarness(t, harnessOptions{})
	from.origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	to := newHarness(t, harnessOptions{})
	key, trusted := exportKeyPair(t)
	src := from.newAPI(t, nil, nil, Options{ExportKey: func() (*airgap.ExportKey, error) { return key, nil }})
	if _, err := src.Ensure(context.Background(), addrs.Provider{Hostname: "registry.terraform.io", Namespace: "hashicorp", Type: "random"}, "3.6.0", "linux_amd64"); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "export")
	if _, err := src.Export(context.Background(), ExportRequest{Out: out}); err != nil {
		t.Fatal(err)
	}

	var now atomic.Pointer[airgap.Trust]
	now.Store(&airgap.Trust{}) // the key revoked since start
	dst := to.newAPI(t, nil, nil, Options{ScratchDir: t.TempDir(), Trust: airgap.Trust{ExportKeys: trusted},
		TrustNow: func() airgap.Trust { return *now.Load() }})
	imp, err := dst.Import(context.Background(), ImportRequest{In: out})
	if imp.Imported != 0 {
		t.Fatalf("an import trusted a key the last reload removed: %+v, %v", imp, err)
	}
	now.Store(&airgap.Trust{ExportKeys: trusted})
	imp, err = dst.Import(context.Background(), ImportRequest{In: out})
	if err != nil || imp.Imported != 1 {
		t.Fatalf("an import with the key trusted now: %+v, %v", imp, err)
	}
}

// exportKeyPair is a new export key and the public keys that trust it,
// as an importing mirror is given them.
func exportKeyPair(t *testing.T) (*airgap.ExportKey, openpgp.EntityList) {
	t.Helper()
	key, err := airgap.GenerateExportKey("exporter")
	if err != nil {
		t.Fatal(err)
	}
	var public bytes.Buffer
	if err := key.WritePublic(&public); err != nil {
		t.Fatal(err)
	}
	trusted, err := airgap.ReadPublicKeys(&public)
	if err != nil {
		t.Fatal(err)
	}
	return key, trusted
}
