package main

import (
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
)

// TestOCIModuleSourceNamesAnAllowedOrigin: the status page's oci://
// example is a module of an origin the mirror serves.
func TestOCIModuleSourceNamesAnAllowedOrigin(t *testing.T) {
	for _, tc := range []struct {
		allowed []string
		want    string
	}{
		{nil, "/modules/registry.opentofu.org/NAMESPACE/"},
		{[]string{"registry.terraform.io", "registry.opentofu.org"}, "/modules/registry.opentofu.org/NAMESPACE/"},
		{[]string{"Registry.Terraform.IO"}, "/modules/registry.terraform.io/NAMESPACE/"},
		{[]string{"tf.corp.example:8443", "registry.terraform.io"}, "/modules/tf.corp.example:8443/NAMESPACE/"},
	} {
		got := ociModuleSource(settings.Config{AllowedOrigins: tc.allowed, OCIModulePrefix: "modules"})("mirror.example")
		if !strings.Contains(got, `"oci://mirror.example`+tc.want) {
			t.Errorf("allowed %v: %s, want %s", tc.allowed, got, tc.want)
		}
	}
}
