package manifest

import (
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

// A module source is a registry address as Terraform tells it from
// go-getter's sources: a registry on a host with a port is one (Terraform
// installs it through the registry protocol); a forced getter, a URL,
// scp-like SSH, a drive letter, parameters and go-getter's GitHub
// shorthand are not.
func TestRegistrySource(t *testing.T) {
	for src, want := range map[string]string{
		"terraform-aws-modules/vpc/aws":             "registry.terraform.io/terraform-aws-modules/vpc/aws",
		"registry.corp:8443/acme/net/aws":           "registry.corp:8443/acme/net/aws",
		"127.0.0.1:38647/acme/net/aws//modules/sub": "127.0.0.1:38647/acme/net/aws",
		"app.terraform.io/corp/deep/azurerm":        "app.terraform.io/corp/deep/azurerm",
		"git::https://example.com/x.git?ref=v1":     "",
		"https://example.com/acme/net/aws":          "",
		"s3::https://s3.amazonaws.com/b/k/m.zip":    "",
		"git@github.com:org/repo.git":               "",
		"git@github.com:org/a/b/c":                  "",
		"C:/modules/acme/net/aws":                   "",
		"example.com/acme/net/aws?ref=1":            "",
		"github.com/org/repo/sub":                   "",
		"./child":                                   "",
	} {
		m, _, ok := registrySource(src, addrs.DefaultModuleHost)
		if got := ""; ok {
			got = m.String()
			if got != want {
				t.Errorf("%q: registry module %s, want %q", src, got, want)
			}
		} else if want != "" {
			t.Errorf("%q: not a registry module, want %s", src, want)
		}
	}
}
