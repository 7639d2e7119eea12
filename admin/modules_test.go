package admin

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// The admin API lists module versions and unpacks a version's package
// into an empty directory of the caller's.
func TestModules(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	o := h.origin
	o.AddTarball("m.tar.gz", fakeorigin.TarGz(map[string][]byte{"sub/main.tf": []byte("# m\n")}))
	o.AddModule("acme", "vpc", "aws", "1.0.0", o.TarballURL("m.tar.gz")+"//sub")
	_, post := socket(t, h.newAPI(t, nil, nil, Options{}))
	const mod = `"module":"registry.terraform.io/acme/vpc/aws"`
	if status, body := post("/v1/module/versions", "{"+mod+"}"); status != 200 || string(body) != "[\"1.0.0\"]\n" {
		t.Errorf("versions: %d %s", status, body)
	}
	dir := t.TempDir()
	status, body := post("/v1/module/unpack", "{"+mod+`,"version":"1.0.0","dir":`+strconv.Quote(dir)+"}")
	var got Module
	if status != 200 || json.Unmarshal(body, &got) != nil || got.Subdir != "sub" || got.CachedAlready || got.SHA256 == "" {
		t.Fatalf("unpack: %d %s", status, body)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "sub", "main.tf")); err != nil || string(b) != "# m\n" {
		t.Errorf("unpacked file: %q, %v", b, err)
	}
	for name, req := range map[string]string{
		"not empty":    "{" + mod + `,"version":"1.0.0","dir":` + strconv.Quote(dir) + "}",
		"relative dir": "{" + mod + `,"version":"1.0.0","dir":"x"}`,
		"bad address":  `{"module":"vpc/aws","version":"1.0.0","dir":"/tmp"}`,
	} {
		if status, body := post("/v1/module/unpack", req); status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", name, status, body)
		}
	}
	if status, _ := post("/v1/module/unpack", "{"+mod+`,"version":"9.9.9","dir":`+strconv.Quote(t.TempDir())+"}"); status != http.StatusNotFound {
		t.Errorf("unknown version: %d, want 404", status)
	}
}

// The admin API's unpack (what sync asks) takes a module version in
// either spelling as the one version: the origin lists "v1.1.0", and
// unpacking "1.1.0" (with no listing before it: the origin is asked in
// its own spelling all the same) then "v1.1.0" fetches one package, the
// second cached already. A version that does not parse is a 400, before the
// origin.
func TestUnpackModuleEverySpelling(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	o := h.origin
	o.AddTarball("m.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# m\n")}))
	o.AddModule("acme", "vpc", "aws", "v1.1.0", o.TarballURL("m.tar.gz"))
	_, post := socket(t, h.newAPI(t, nil, nil, Options{}))
	const mod = `"module":"registry.terraform.io/acme/vpc/aws"`
	var shas []string
	for i, spelled := range []string{"1.1.0", "v1.1.0"} {
		status, body := post("/v1/module/unpack", "{"+mod+`,"version":"`+spelled+`","dir":`+strconv.Quote(t.TempDir())+"}")
		var got Module
		if status != 200 || json.Unmarshal(body, &got) != nil || got.Version != "v1.1.0" || got.CachedAlready != (i > 0) {
			t.Fatalf("unpack %s: %d %s", spelled, status, body)
		}
		shas = append(shas, got.SHA256)
	}
	if shas[0] != shas[1] {
		t.Errorf("two packages for one version: %v", shas)
	}
	if n := o.Hits(fakeorigin.Tarball); n != 1 {
		t.Errorf("%d source fetches, want 1", n)
	}
	before := o.TotalHits()
	for _, bad := range []string{"latest", "vv1.1.0", "1.1.0-", "1.1.0/x", ""} {
		if status, body := post("/v1/module/unpack", "{"+mod+`,"version":"`+bad+`","dir":`+strconv.Quote(t.TempDir())+"}"); status != http.StatusBadRequest {
			t.Errorf("version %q: %d %s, want 400", bad, status, body)
		}
	}
	if n := o.TotalHits() - before; n != 0 {
		t.Errorf("malformed versions made %d origin requests", n)
	}
}
