package main

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

func writeTestFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The credentials file: each source host's secret, from the file, a
// variable or a file, tied to allowed origins; mistakes stop start-up
// with an error that never quotes a secret.
func TestLoadModuleSourceCredentials(t *testing.T) {
	secretFile := writeTestFile(t, "secret", "from-file-secret\n")
	env := func(n string) (string, bool) {
		if n == "GH_TOKEN" {
			return "env-secret", true
		}
		return "", false
	}
	allowed := []string{"registry.example.com", "registry.terraform.io"}
	for _, tc := range []struct {
		name, file, wantErr string
		origin, host        string
		wantUser, wantPass  string
		wantToken           string
	}{
		{name: "token from env", file: `source_host "GitHub.com" {
  origins = ["registry.example.com"]
  token_env = "GH_TOKEN"
}`, origin: "registry.example.com", host: "github.com", wantToken: "env-secret"},
		{name: "password from file, port", file: `source_host "git.example.com:8443" {
  origins = ["registry.terraform.io"]
  username = "bot"
  password_file = "` + secretFile + `"
}`, origin: "registry.terraform.io", host: "git.example.com:8443", wantUser: "bot", wantPass: "from-file-secret"},
		{name: "other origin gets nothing", file: `source_host "github.com" {
  origins = ["registry.example.com"]
  token = "inline-secret"
}`, origin: "registry.terraform.io", host: "github.com"},
		{name: "origin not allowed", file: `source_host "github.com" {
  origins = ["evil.example"]
  token = "inline-secret"
}`, wantErr: "not one of --allowed-origins"},
		{name: "two secrets", file: `source_host "github.com" {
  origins = ["registry.example.com"]
  token = "inline-secret"
  token_env = "GH_TOKEN"
}`, wantErr: "give one of token"},
		{name: "password without user", file: `source_host "github.com" {
  origins = ["registry.example.com"]
  password = "inline-secret"
}`, wantErr: "needs a username"},
		{name: "missing variable", file: `source_host "github.com" {
  origins = ["registry.example.com"]
  token_env = "NOPE"
}`, wantErr: "NOPE is not set"},
		{name: "no origins", file: `source_host "github.com" {
  origins = []
  token = "inline-secret"
}`, wantErr: "origins is empty"},
		{name: "unknown attribute", file: `source_host "github.com" {
  origins = ["registry.example.com"]
  tokn = "inline-secret"
}`, wantErr: `unknown attribute "tokn"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadModuleSourceCredentials(writeTestFile(t, "creds.hcl", tc.file), allowed, env)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "inline-secret") {
					t.Errorf("error quotes the secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := c.String() + strings.Join(c.summary(), " "); strings.Contains(s, "secret") {
				t.Errorf("printed: %s", s)
			}
			cred, ok := c.SourceCredential(svchost.Hostname(tc.origin), tc.host)
			want := tc.wantToken != "" || tc.wantPass != ""
			if ok != want || cred.Username != tc.wantUser || cred.Password != tc.wantPass || cred.Token != tc.wantToken {
				t.Errorf("credential for %s of %s: %v %q/%q/%q", tc.host, tc.origin, ok, cred.Username, cred.Password, cred.Token)
			}
		})
	}
}

// A credential tied to a public registry, where anyone publishes modules
// and their locations, is named for the start-up's warning; one tied to
// a private registry is not.
func TestModuleSourceCredentialsTiedToPublicRegistries(t *testing.T) {
	file := writeTestFile(t, "creds.hcl", `source_host "github.com" {
  origins = ["registry.example.com"]
  token = "inline-secret"
}
source_host "git.example.com:8443" {
  origins = ["registry.example.com", "registry.terraform.io", "registry.opentofu.org"]
  token = "inline-secret"
}`)
	c, err := loadModuleSourceCredentials(file, []string{"registry.example.com", "registry.terraform.io", "registry.opentofu.org"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "git.example.com:8443 for registry.opentofu.org,git.example.com:8443 for registry.terraform.io"
	if got := strings.Join(c.publicTies(), ","); got != want {
		t.Errorf("publicTies = %q, want %q", got, want)
	}
}

// Through the front door: a private repository named by a module of an
// origin its credential is tied to is served; without the tie, the
// package answer is a 502 saying the repository needs credentials.
func TestModuleSourceCredentialsFlag(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip(err)
	}
	for _, tc := range []struct {
		name   string
		origin string
		want   int
	}{
		{"tied", tfRegistry, http.StatusOK},
		{"not tied", privateRegistry, http.StatusBadGateway},
	} {
		t.Run(tc.name, func(t *testing.T) {
			origin, err := fakeorigin.Start(fakeorigin.Options{Hostnames: e2eOrigins})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(origin.Close)
			u, _ := url.Parse(origin.GitURL("private"))
			creds := writeTestFile(t, "creds.hcl", `source_host "`+u.Host+`" {
  origins  = ["`+tc.origin+`"]
  username = "bot"
  password = "pw-123456"
}
`)
			e := &e2e{t: t, origin: origin}
			e.startMirror(filepath.Join(t.TempDir(), "data"), "--module-source-credentials", creds)
			if _, err := origin.AddGitRepo("private", map[string][]byte{"main.tf": []byte("# private\n")}, "v1.0.0"); err != nil {
				t.Fatal(err)
			}
			origin.RequireGitAuth("private", "bot", "pw-123456")
			origin.AddModule("acme", "vpc", "aws", "1.0.0", "git::"+origin.GitURL("private")+"?ref=v1.0.0")
			c := trustingClient(t, e.caFile)
			resp, err := c.Get(e.url + "registry/" + tfRegistry + "/v1/modules/acme/vpc/aws/1.0.0/package.tar.gz")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("package: %d %s, want %d", resp.StatusCode, body, tc.want)
			}
			if tc.want != http.StatusOK && (!strings.Contains(string(body), "needs credentials") || strings.Contains(string(body), "pw-123456")) {
				t.Errorf("502 body %s", body)
			}
			if seen := origin.GitAuthSeen(); (tc.want == http.StatusOK) != (len(seen) > 0) {
				t.Errorf("Git host saw Authorization %q", seen)
			}
		})
	}
}
