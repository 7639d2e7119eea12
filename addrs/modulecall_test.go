package addrs

import (
	"strings"
	"testing"

	"github.com/apparentlymart/go-versions/versions"
)

// A module call's constraint selects what Terraform and OpenTofu install
// for it (their internal/initwd): hashicorp/go-version's rules, and a
// prerelease only when named exactly, which OpenTofu also reads with a
// leading "v". Each case is the newest version of the list the call
// selects, "none" for none.
func TestModuleCallVersions(t *testing.T) {
	list := versions.List{}
	for _, s := range []string{"0.0.1", "0.0.2", "0.0.3-alpha.1", "1.0.0+build.5", "1.5.0", "1.9.9", "2.0.0", "2.1.0-rc1"} {
		list = append(list, versions.MustParseVersion(s))
	}
	newest := func(has func(versions.Version) bool) string {
		out := "none"
		var best versions.Version
		for _, v := range list {
			if has(v) && (out == "none" || v.GreaterThan(best)) {
				best, out = v, v.String()
			}
		}
		return out
	}
	for _, tc := range []struct {
		constraint      string
		terraform, tofu string
	}{
		{"~> 1", "2.0.0", "2.0.0"}, // ">= 1": a provider's "~> 1" is "< 2"
		{"~> 0", "2.0.0", "2.0.0"},
		{"~> 1.5", "1.9.9", "1.9.9"},
		{"~> 1.5.0", "1.5.0", "1.5.0"},
		{"1.0.0", "1.0.0+build.5", "1.0.0+build.5"}, // build metadata is no part of the comparison
		{"= 1.0.0", "1.0.0+build.5", "1.0.0+build.5"},
		{"!= 2.0.0", "1.9.9", "1.9.9"},
		{">= 1.0, < 2.0", "1.9.9", "1.9.9"},
		{">= 2.0.0", "2.0.0", "2.0.0"}, // 2.1.0-rc1 is not named
		{"0.0.3-alpha.1", "0.0.3-alpha.1", "0.0.3-alpha.1"},
		{"=0.0.3-alpha.1", "0.0.3-alpha.1", "0.0.3-alpha.1"},
		{"= 0.0.3-alpha.1", "none", "none"},         // npm's syntax takes no space after "=": no prerelease
		{"v0.0.3-alpha.1", "none", "0.0.3-alpha.1"}, // OpenTofu drops the "v" to read it for prereleases
		{"> 0.0.2, 0.0.3-alpha.1", "none", "none"},  // read as npm's syntax, with a comma: no prerelease
		{"v1.5.0", "1.5.0", "1.5.0"},
	} {
		for _, client := range []struct {
			name  string
			dropV bool
			want  string
		}{{"terraform", false, tc.terraform}, {"opentofu", true, tc.tofu}} {
			mv, err := ParseModuleCallVersions(tc.constraint, client.dropV)
			if err != nil {
				t.Errorf("%s: %q: %v", client.name, tc.constraint, err)
				continue
			}
			if got := newest(mv.Has); got != client.want {
				t.Errorf("%s: %q selects %s, want %s", client.name, tc.constraint, got, client.want)
			}
		}
	}
	var none ModuleCallVersions
	if got := newest(none.Has); got != "2.0.0" {
		t.Errorf("no constraint selects %s, want 2.0.0 (no prerelease)", got)
	}
	for _, bad := range []string{"", " ", "~> x", "^1.0", "1.0.0 || 2.0.0", ">= 99999999999999999999"} {
		if _, err := ParseModuleCallVersions(bad, false); err == nil || !strings.Contains(err.Error(), "constraint") {
			t.Errorf("%q: %v, want refused", bad, err)
		}
	}
}
