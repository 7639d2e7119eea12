package fakeorigin

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestModuleRegistry(t *testing.T) {
	o, c := start(t, Options{})
	o.AddModule("acme", "vpc", "aws", "1.0.0", "git::https://example.test/vpc.git?ref=v1.0.0")
	o.AddModule("acme", "vpc", "aws", "1.1.0", "https://example.test/vpc.tgz")

	r := get(t, c, o.URL+"/.well-known/terraform.json")
	var disco map[string]string
	if err := json.Unmarshal(r.body, &disco); err != nil || disco["modules.v1"] != "/v1/modules/" {
		t.Errorf("discovery = %s (%v), want modules.v1 /v1/modules/", r.body, err)
	}
	r = get(t, c, o.URL+"/v1/modules/acme/vpc/aws/versions")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"versions":[{"version":"1.0.0"},{"version":"1.1.0"}]`) {
		t.Errorf("versions: %d %s", r.status, r.body)
	}
	r = get(t, c, o.URL+"/v1/modules/acme/vpc/aws/1.0.0/download")
	if r.status != http.StatusNoContent || r.header.Get("X-Terraform-Get") != "git::https://example.test/vpc.git?ref=v1.0.0" {
		t.Errorf("download: %d %q", r.status, r.header.Get("X-Terraform-Get"))
	}
	for _, path := range []string{"/v1/modules/acme/vpc/aws/9.0.0/download", "/v1/modules/acme/nope/aws/versions", "/tarballs/nope.tgz"} {
		if r := get(t, c, o.URL+path); r.status != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", path, r.status)
		}
	}
	if o.Hits(ModuleVersions) != 2 || o.Hits(ModuleDownload) != 2 || o.Hits(Tarball) != 1 {
		t.Errorf("hits: versions %d download %d tarball %d", o.Hits(ModuleVersions), o.Hits(ModuleDownload), o.Hits(Tarball))
	}

	data := TarGz(map[string][]byte{"main.tf": []byte("# x\n")})
	o.AddTarball("vpc.tgz", data)
	if r := get(t, c, o.TarballURL("vpc.tgz")); r.status != http.StatusOK || string(r.body) != string(data) {
		t.Errorf("tarball: %d, %d bytes", r.status, len(r.body))
	}
}

func TestGitRepoOverSmartHTTP(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	o, _ := start(t, Options{})
	commit, err := o.AddGitRepo("vpc", map[string][]byte{"main.tf": []byte("# v1\n"), "modules/sub/main.tf": []byte("# sub\n")}, "v1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.AddGitRepo("vpc", map[string][]byte{"main.tf": []byte("# v2\n")}, "v2.0.0"); err != nil {
		t.Fatal(err)
	}
	ca, err := o.CAFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "clone")
	cmd := exec.Command("git", "clone", "-q", "--depth", "1", "--branch", "v1.0.0", o.GitURL("vpc"), dst)
	cmd.Env = append(os.Environ(), "GIT_SSL_CAINFO="+ca, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(dst, "modules", "sub", "main.tf"))
	if err != nil || string(got) != "# sub\n" {
		t.Errorf("cloned file = %q, %v", got, err)
	}
	out, _ := exec.Command("git", "-C", dst, "rev-parse", "HEAD").Output()
	if strings.TrimSpace(string(out)) != commit {
		t.Errorf("cloned commit %s, want %s", out, commit)
	}
	if o.Hits(Git) == 0 {
		t.Error("no Git hits counted")
	}
}
