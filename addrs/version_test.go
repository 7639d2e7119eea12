package addrs

import "testing"

// TestParseModuleVersion: every spelling of one module version is one
// version, rendered in the canonical form the records are keyed by; what
// is not a version is refused.
func TestParseModuleVersion(t *testing.T) {
	for in, want := range map[string]string{
		"1.1.0":         "1.1.0",
		"v1.1.0":        "1.1.0",
		"v1.1":          "1.1.0",
		"1.0.0-rc.1+b2": "1.0.0-rc.1+b2",
		"v2.0.0-beta.1": "2.0.0-beta.1",
		"1.0.0+b-1":     "1.0.0+b-1",
		"1.0.0-rc-1":    "1.0.0-rc-1",
	} {
		v, err := ParseModuleVersion(in)
		if err != nil || v.String() != want {
			t.Errorf("ParseModuleVersion(%q) = %q, %v; want %q", in, v, err, want)
		}
	}
	a, _ := ParseModuleVersion("v1.1.0")
	b, _ := ParseModuleVersion("1.1.0")
	if a != b {
		t.Errorf("v1.1.0 and 1.1.0 are two versions: %#v, %#v", a, b)
	}
	for _, bad := range []string{"", "v", "vv1.1.0", "V1.1.0", "latest", "1.1.0/..", "../1.1.0", " 1.1.0", "1.1.0 ",
		"99999999999999999999.0.0", "1.0.0+.", "1.0.0-a..b", "1.1.0%2F", "1.1.0-", "1.1.0+", "v1.1.0-+", "1.1.0-rc.1+"} {
		if v, err := ParseModuleVersion(bad); err == nil {
			t.Errorf("ParseModuleVersion(%q) = %q, want an error", bad, v)
		}
	}
}
