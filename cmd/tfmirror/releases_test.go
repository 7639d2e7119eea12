package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// TestReadArmoredKeys: a keys file holds one or more armored key blocks;
// a file with none is refused, and no file means the shipped keys.
func TestReadArmoredKeys(t *testing.T) {
	dir := t.TempDir()
	two := filepath.Join(dir, "two.asc")
	if err := os.WriteFile(two, []byte("# the publishers\n"+releases.HashiCorpKey+"\n"+releases.OpenTofuKey), 0o644); err != nil {
		t.Fatal(err)
	}
	keys, err := readArmoredKeys(two)
	if err != nil || len(keys) != 2 || !strings.Contains(keys[1], "END PGP PUBLIC KEY BLOCK") {
		t.Fatalf("%d keys, %v", len(keys), err)
	}
	none := filepath.Join(dir, "none.asc")
	if err := os.WriteFile(none, []byte("not a key"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readArmoredKeys(none); err == nil {
		t.Error("a file without a key accepted")
	}
	if keys, err := readArmoredKeys(""); err != nil || keys != nil {
		t.Errorf("no file: %v %v", keys, err)
	}
}

// The status page gives the CLI installers' settings only when the
// releases door serves a publisher: by default their hosts are no
// allowed origins, and the settings pointed at a door answering 404.
// Hosts are compared as the origin client compares them (a default port
// is none, an IDN host is its punycode), where a URL naming :443 had been
// said not to be served.
func TestCLIReleasesOffUntilAPublishersHostsAreAllowed(t *testing.T) {
	const off = "their publishers' hosts are not allowed origins: add releases.hashicorp.com (HashiCorp) or get.opentofu.org and github.com (OpenTofu) to allowed_origins"
	for _, tc := range []struct {
		cfg  settings.Config
		want string
	}{
		{settings.Config{AllowedOrigins: []string{"registry.terraform.io", "registry.opentofu.org"}}, off},
		{settings.Config{AllowedOrigins: []string{"registry.terraform.io", "Releases.HashiCorp.com"}}, ""},
		{settings.Config{AllowedOrigins: []string{"get.opentofu.org"}}, off},
		{settings.Config{AllowedOrigins: []string{"get.opentofu.org", "github.com"}}, ""},
		{settings.Config{AllowedOrigins: []string{"releases.example.com"}, ReleasesHashiCorpURL: "https://releases.example.com/hc/"}, ""},
		{settings.Config{AllowedOrigins: []string{"127.0.0.1:8443"}, ReleasesHashiCorpURL: "https://127.0.0.1:8443/"}, ""},
		{settings.Config{AllowedOrigins: []string{"127.0.0.1"}, ReleasesHashiCorpURL: "https://127.0.0.1:8443/"}, strings.Replace(off, "releases.hashicorp.com", "127.0.0.1:8443", 1)},
		// A host as the origin client names it: the default port is none.
		{settings.Config{AllowedOrigins: []string{"releases.example.com"}, ReleasesHashiCorpURL: "https://releases.example.com:443/hc/"}, ""},
		{settings.Config{AllowedOrigins: []string{"bücher.example"}, ReleasesOpenTofuAPIURL: "https://xn--bcher-kva.example/api.json", ReleasesOpenTofuURL: "https://BÜCHER.example/dl/"}, ""},
	} {
		if got := cliReleasesOff(tc.cfg); got != tc.want {
			t.Errorf("allowed %v: %q, want %q", tc.cfg.AllowedOrigins, got, tc.want)
		}
	}
}
