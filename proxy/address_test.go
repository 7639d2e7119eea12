package proxy

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
)

func TestParseProvider(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		host, ns, typ   string
		want            string // provider string, "" when an error is expected
		wantErrContains string
	}{
		{name: "public registry", host: "registry.terraform.io", ns: "hashicorp", typ: "random", want: "registry.terraform.io/hashicorp/random"},
		{name: "host with port", host: "example.com:8443", ns: "acme", typ: "foo", want: "example.com:8443/acme/foo"},
		{name: "punycode host", host: "xn--caf-dma.example", ns: "acme", typ: "foo", want: "xn--caf-dma.example/acme/foo"},
		{name: "unicode namespace percent-encoded", host: "example.com", ns: "caf%C3%A9", typ: "foo", want: "example.com/café/foo"},
		{name: "dash inside", host: "example.com", ns: "my-org", typ: "my-type", want: "example.com/my-org/my-type"},
		{name: "uppercase host", host: "Registry.Terraform.IO", ns: "hashicorp", typ: "random", wantErrContains: "canonical"},
		{name: "default port spelled out", host: "example.com:443", ns: "a", typ: "b", wantErrContains: "canonical"},
		{name: "unicode host not punycoded", host: "caf%C3%A9.example", ns: "a", typ: "b", wantErrContains: "canonical"},
		{name: "trailing dot", host: "registry.terraform.io.", ns: "a", typ: "b", wantErrContains: "trailing dot"},
		{name: "trailing dots", host: "0..", ns: "a", typ: "b", wantErrContains: "trailing dot"},
		{name: "trailing dot with port", host: "example.com.:8443", ns: "a", typ: "b", wantErrContains: "trailing dot"},
		{name: "empty host", host: "", ns: "a", typ: "b", wantErrContains: "empty"},
		{name: "host with path", host: "example.com%2Fevil", ns: "a", typ: "b", wantErrContains: "forbidden"},
		{name: "uppercase namespace", host: "example.com", ns: "HashiCorp", typ: "random", wantErrContains: "lowercase"},
		{name: "encoded slash in namespace", host: "example.com", ns: "a%2Fb", typ: "c", wantErrContains: "forbidden"},
		{name: "encoded backslash", host: "example.com", ns: "a%5Cb", typ: "c", wantErrContains: "forbidden"},
		{name: "dot dot", host: "example.com", ns: "..", typ: "c", wantErrContains: "dot"},
		{name: "encoded dot dot", host: "example.com", ns: "%2E%2E", typ: "c", wantErrContains: "dot"},
		{name: "underscore", host: "example.com", ns: "a_b", typ: "c", wantErrContains: "letters, digits"},
		{name: "uppercase unicode namespace", host: "example.com", ns: "CAF%C3%89", typ: "foo", wantErrContains: "lowercase"},
		{name: "fullwidth namespace", host: "example.com", ns: "%EF%BD%81", typ: "foo", wantErrContains: "normal form"},
		{name: "terraform- type", host: "example.com", ns: "a", typ: "terraform-provider-foo", wantErrContains: "terraform-"},
		{name: "leading dash", host: "example.com", ns: "-a", typ: "c", wantErrContains: "dash"},
		{name: "double dash", host: "example.com", ns: "a--b", typ: "c", wantErrContains: "dash"},
		{name: "overlong type", host: "example.com", ns: "a", typ: strings.Repeat("x", 65), wantErrContains: "too long"},
		{name: "bad escape", host: "example.com", ns: "a%zz", typ: "c", wantErrContains: "not a valid path segment"},
		{name: "nul byte", host: "example.com", ns: "a%00", typ: "c", wantErrContains: "forbidden"},
		{name: "invalid utf8", host: "example.com", ns: "a%ff", typ: "c", wantErrContains: "UTF-8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := parseProvider(tc.host, tc.ns, tc.typ)
			if tc.want != "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if p.String() != tc.want {
					t.Fatalf("got %q, want %q", p.String(), tc.want)
				}
				return
			}
			var reqErr *httperr.RequestError
			if !errors.As(err, &reqErr) {
				t.Fatalf("got %v, want a RequestError", err)
			}
			if httperr.Status(err) != 400 {
				t.Errorf("status %d, want 400", httperr.Status(err))
			}
			if !strings.Contains(err.Error(), tc.wantErrContains) {
				t.Errorf("error %q does not mention %q", err, tc.wantErrContains)
			}
		})
	}
}

func TestParseVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in string
		ok bool
	}{
		{"1.2.3", true},
		{"0.0.1-beta.1", true},
		{"1.0.0+build.5", true},
		{"1.2", false}, // clients always send the canonical form
		{"v1.2.3", false},
		{"01.2.3", false},
		{"", false},
		{"1.2.3." + strings.Repeat("9", 200), false},
		{"18700000000000000000.0.0", false}, // overflows 64 bits
		{"1.0.0-rc.1+linux-amd64.2", true},
		{"0.0.0+.", false},
		{"1.0.0-a..b", false},
		{"1.0.0-rc_1", false},
		{"1.0.0+build.", false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			_, err := parseVersion(tc.in)
			if (err == nil) != tc.ok {
				t.Fatalf("parseVersion(%q) error = %v, want ok=%v", tc.in, err, tc.ok)
			}
		})
	}
}

// The file-name grammar is addrs.ParseArchiveName's (addrs'
// TestArchiveName has its cases); the front door adds that the version is
// canonical semver and that a bad name is the client's error (400).
func TestArchiveNameRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, typ, file string
		wantVersion     string
		wantPlatform    string
		wantErr         bool
	}{
		{name: "plain", typ: "random", file: "terraform-provider-random_3.6.0_linux_amd64.zip", wantVersion: "3.6.0", wantPlatform: "linux_amd64"},
		{name: "prerelease", typ: "aws", file: "terraform-provider-aws_6.0.0-beta1_darwin_arm64.zip", wantVersion: "6.0.0-beta1", wantPlatform: "darwin_arm64"},
		{name: "dashed type", typ: "my-type", file: "terraform-provider-my-type_1.0.0_windows_386.zip", wantVersion: "1.0.0", wantPlatform: "windows_386"},
		{name: "other type", typ: "random", file: "terraform-provider-null_1.0.0_linux_amd64.zip", wantErr: true},
		{name: "version not canonical", typ: "random", file: "terraform-provider-random_1.0_linux_amd64.zip", wantErr: true},
		{name: "version not semver", typ: "random", file: "terraform-provider-random_v1_linux_amd64.zip", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, pl, err := parseArchiveName(tc.typ, tc.file)
			if tc.wantErr {
				if err == nil || httperr.Status(err) != http.StatusBadRequest {
					t.Fatalf("parsed %q as %s %s (%v), want a 400 error", tc.file, v, pl, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if v.String() != tc.wantVersion || pl.String() != tc.wantPlatform {
				t.Fatalf("got %s %s", v, pl)
			}
			if back := addrs.ArchiveName(tc.typ, v.String(), pl.String()); back != tc.file {
				t.Fatalf("archiveName = %q, want %q", back, tc.file)
			}
		})
	}
}
