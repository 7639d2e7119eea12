package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/oci"
)

// TestOCIModuleSourceNamesAnAllowedOrigin: the status page's oci://
// example is a module of an origin the mirror serves, and, its
// placeholders filled in, names that module's repository as the OCI door
// names it (a host with a port written HOST__PORT, as OCI names cannot
// hold a colon).
func TestOCIModuleSourceNamesAnAllowedOrigin(t *testing.T) {
	names, err := oci.NewNames("providers", "modules")
	if err != nil {
		t.Fatal(err)
	}
	source := regexp.MustCompile(`source = "oci://mirror\.example/([^?"]+)\?tag=VERSION"`)
	for _, tc := range []struct {
		allowed []string
		host    string // the module's host, as addresses write it
	}{
		{nil, "registry.opentofu.org"},
		{[]string{"registry.terraform.io", "registry.opentofu.org"}, "registry.opentofu.org"},
		{[]string{"Registry.Terraform.IO"}, "registry.terraform.io"},
		{[]string{"tf.corp.example:8443", "registry.terraform.io"}, "tf.corp.example:8443"},
		{[]string{"bücher.example"}, "xn--bcher-kva.example"},
	} {
		got := ociModuleSource(settings.Config{AllowedOrigins: tc.allowed, OCIModulePrefix: "modules"})("mirror.example")
		m := source.FindStringSubmatch(got)
		if m == nil {
			t.Errorf("allowed %v: %s, want an oci:// source on mirror.example", tc.allowed, got)
			continue
		}
		filled := strings.NewReplacer("NAMESPACE", "acme", "NAME", "net", "SYSTEM", "aws").Replace(m[1])
		repo, err := names.Parse(filled)
		if err != nil || repo.Kind != oci.KindModule || repo.Module.Hostname.String() != tc.host || repo.Module.String() != tc.host+"/acme/net/aws" {
			t.Errorf("allowed %v: the source's repository %q, filled in %q: %+v, %v; want the module %s/acme/net/aws", tc.allowed, m[1], filled, repo.Module, err, tc.host)
		}
	}
}
