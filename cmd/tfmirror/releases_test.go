package main

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
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
		if got, _ := cliReleasesStatus(tc.cfg); got != tc.want {
			t.Errorf("allowed %v: %q, want %q", tc.cfg.AllowedOrigins, got, tc.want)
		}
	}
}

// TestCLIReleasesForThePublishersServed: with one publisher's hosts
// allowed and not the other's, the status page gives the installer
// settings of the one served alone, after a line saying which hosts the
// other needs, and the door answers the other's paths 404 (its listing
// of HashiCorp's products among them) without asking its origin; a
// sealed mirror serves both, whatever the allowed origins, since it
// serves what it holds and asks no origin.
func TestCLIReleasesForThePublishersServed(t *testing.T) {
	tofuOnly := settings.Config{AllowedOrigins: []string{"registry.opentofu.org", "get.opentofu.org", "github.com"}}
	off, snippets := cliReleasesStatus(tofuOnly)
	if off != "" || snippets == nil {
		t.Fatalf("OpenTofu's hosts allowed: off %q", off)
	}
	page := snippets("https://mirror.example.com/")
	for _, want := range []string{
		"# HashiCorp's releases are not served: add releases.hashicorp.com to allowed_origins\n",
		"TOFUENV_LIST_URL=https://mirror.example.com/releases/opentofu/api.json",
		"tfswitch --product opentofu --mirror",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the settings lack %q:\n%s", want, page)
		}
	}
	for _, unwanted := range []string{"TFENV_REMOTE", "/releases/hashicorp", "terraformReleasesUrl", "hc-install", "terraform_72D7468F.asc"} {
		if strings.Contains(page, unwanted) {
			t.Errorf("the settings give HashiCorp's %q, which the door refuses:\n%s", unwanted, page)
		}
	}

	hcOnly := settings.Config{AllowedOrigins: []string{"releases.hashicorp.com"}}
	if _, snippets := cliReleasesStatus(hcOnly); snippets == nil || strings.Contains(snippets("https://m/"), "TOFUENV") ||
		!strings.Contains(snippets("https://m/"), "# OpenTofu's releases are not served: add get.opentofu.org and github.com to allowed_origins") {
		t.Errorf("HashiCorp's hosts allowed: the settings are\n%s", snippets("https://m/"))
	}

	sealed := settings.Config{Offline: true, AllowedOrigins: []string{"registry.terraform.io"}}
	if served, _ := cliPublishers(sealed); len(served) != 2 {
		t.Errorf("sealed: %v served, want both", served)
	}

	door, err := openReleasesDoor(slog.New(slog.DiscardHandler), tofuOnly, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/releases/hashicorp/", "/releases/hashicorp/terraform/index.json", "/releases/hashicorp/terraform/1.6.0/terraform_1.6.0_linux_amd64.zip"} {
		rec := httptest.NewRecorder()
		door.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "not served") {
			t.Errorf("GET %s, HashiCorp not served: %d %q, want 404 saying so", p, rec.Code, rec.Body.String())
		}
	}
}
