package discovery

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	svchost "github.com/hashicorp/terraform-svchost"
)

func TestLoadCredentials(t *testing.T) {
	tests := []struct {
		name    string
		file    string // file name and content, "" for none
		content string
		env     []string
		want    map[string]string // host -> token
		wantErr string
	}{
		{
			name: "CLI config with other blocks",
			file: "terraformrc",
			content: `
provider_installation {
  network_mirror { url = "https://mirror.example.com/" }
}
credentials "registry.example.com" {
  token = "file-token"
}
credentials "Other.Example.com:8443" { token = "other" }
`,
			want: map[string]string{"registry.example.com": "file-token", "other.example.com:8443": "other"},
		},
		{
			name:    "JSON credentials file",
			file:    "credentials.tfrc.json",
			content: `{"credentials": {"registry.example.com": {"token": "json-token"}}}`,
			want:    map[string]string{"registry.example.com": "json-token"},
		},
		{
			name:    "TF_TOKEN_ encoding: _ is a dot, __ a hyphen; env wins over the file",
			file:    "terraformrc",
			content: `credentials "registry.example.com" { token = "file-token" }`,
			env: []string{
				"TF_TOKEN_registry_example_com=env-token",
				"TF_TOKEN_my__registry_example_org=dash-token",
				"TF_TOKEN_xn____caf__dma_example=idn-token",
				"TF_TOKEN_bücher_example=unicode-token",
				"PATH=/usr/bin",
			},
			want: map[string]string{
				"registry.example.com":    "env-token",
				"my-registry.example.org": "dash-token",
				"xn--caf-dma.example":     "idn-token",
				"xn--bcher-kva.example":   "unicode-token",
			},
		},
		{name: "no token attribute", file: "rc", content: `credentials "a.example" { other = "x" }`, wantErr: "no token"},
		{name: "empty token", file: "rc", content: `credentials "a.example" { token = "" }`, wantErr: "non-empty string"},
		{name: "token not a string", file: "rc", content: `credentials "a.example" { token = 3 }`, wantErr: "non-empty string"},
		{name: "bad host label", file: "rc", content: `credentials "a b" { token = "x" }`, wantErr: `"a b"`},
		{name: "syntax error", file: "rc", content: `credentials "a.example" {`, wantErr: "credentials file"},
		{name: "duplicate host", file: "rc", content: "credentials \"A.example\" { token = \"1\" }\ncredentials \"a.example\" { token = \"2\" }", wantErr: "more than one"},
		{name: "empty env token", env: []string{"TF_TOKEN_a_example="}, wantErr: "TF_TOKEN_a_example is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var file string
			if tc.file != "" {
				file = filepath.Join(t.TempDir(), tc.file)
				if err := os.WriteFile(file, []byte(tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c, err := LoadCredentials(file, tc.env)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "file-token") {
					t.Fatalf("error reveals a token: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := len(c.Hosts()); got != len(tc.want) {
				t.Fatalf("hosts %v, want %d", c.Hosts(), len(tc.want))
			}
			for h, tok := range tc.want {
				if got := c.Token(svchost.Hostname(h)); got != tok {
					t.Errorf("Token(%s) = %q, want %q", h, got, tok)
				}
			}
			if strings.Contains(c.String(), "token") && strings.Contains(c.String(), "-token") {
				t.Fatalf("String reveals tokens: %s", c)
			}
		})
	}
}
