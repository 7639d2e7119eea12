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
