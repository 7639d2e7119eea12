package records

import "testing"

func TestNormalModuleKey(t *testing.T) {
	for _, c := range []struct{ prefix, key, want string }{
		{"module/", "module/example.com/Acme/VPC/aws/1.0.0", "module/example.com/acme/vpc/aws/1.0.0"},
		{"modversions/", "modversions/example.com/Acme/VPC/aws", "modversions/example.com/acme/vpc/aws"},
		{"modzip/", "modzip/example.com:8443/a/b/c/v1.0.0-RC1", "modzip/example.com:8443/a/b/c/v1.0.0-RC1"},
		{"release/absent/module/", "release/absent/module/h/NS/N/S/1.0.0", "release/absent/module/h/ns/n/s/1.0.0"},
		{"lastuse/module/", "lastuse/module/h/NS/N", "lastuse/module/h/NS/N"}, // not a module address
	} {
		got, differs := NormalModuleKey(c.prefix, c.key)
		if got != c.want || differs != (c.want != c.key) {
			t.Errorf("NormalModuleKey(%q, %q) = %q, %v; want %q", c.prefix, c.key, got, differs, c.want)
		}
	}
}
