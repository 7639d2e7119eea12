package addrs

import (
	"fmt"
	"strings"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/apparentlymart/go-versions/versions/constraints"
)

// MaxVersionLen bounds a version's canonical form (its String), in bytes:
// the longest version a client can ask the mirror's doors for. A version
// an origin lists that is longer is skipped as an invalid one is, so that
// no answer offers a version whose every request would be refused.
const MaxVersionLen = 128

// ParseSemver is versions.ParseVersion made strict and safe. The library
// panics on a numeric part that does not fit in 64 bits, and both request
// paths and origin answers can carry such a part; it also accepts
// prerelease and build parts that semantic versioning forbids, such as
// "1.0.0+." or "1.0.0-a..b". Both become errors here, as does a version
// whose canonical form is longer than MaxVersionLen.
func ParseSemver(s string) (v versions.Version, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = versions.Version{}, fmt.Errorf("version %q is out of range", s)
		}
	}()
	if v, err = versions.ParseVersion(s); err != nil {
		return versions.Version{}, err
	}
	for _, extra := range []struct{ what, s string }{
		{"prerelease", string(v.Prerelease)},
		{"build metadata", string(v.Metadata)},
	} {
		if extra.s != "" && !validSemverExtra(extra.s) {
			return versions.Version{}, fmt.Errorf("%s %q must be dot-separated, non-empty identifiers of letters, digits and dashes", extra.what, extra.s)
		}
	}
	if n := len(v.String()); n > MaxVersionLen {
		return versions.Version{}, fmt.Errorf("version %.40q...: %d bytes, more than the %d a mirror serves", s, n, MaxVersionLen)
	}
	return v, nil
}

// validSemverExtra reports whether s is a dot-separated series of
// non-empty [0-9A-Za-z-] identifiers (semver.org items 9 and 10).
func validSemverExtra(s string) bool {
	for ident := range strings.SplitSeq(s, ".") {
		if ident == "" {
			return false
		}
		for _, r := range ident {
			if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-') {
				return false
			}
		}
	}
	return true
}

// ParseModuleVersion parses a registry module's version as the clients'
// module installers do: semantic versioning with an optional leading
// "v" (the module registry protocol lets an origin list "v1.1.0", and
// Terraform's installer reads it as 1.1.0), otherwise as ParseSemver.
// The version returned is the one version every spelling names: its
// String is the canonical form ("1.1.0" for "v1.1.0"), the one records,
// release times and the package policy's rules are keyed by.
//
// It is stricter than ParseSemver on one point: a "-" or "+" with
// nothing after it ("1.1.0-", which the library reads as 1.1.0) is
// refused, as the clients' module installers refuse it, so that a
// version has no spelling a client would not send.
func ParseModuleVersion(s string) (versions.Version, error) {
	bare := strings.TrimPrefix(s, "v")
	main, meta, hasMeta := strings.Cut(bare, "+")
	_, pre, hasPre := strings.Cut(main, "-")
	if hasMeta && meta == "" || hasPre && pre == "" {
		return versions.Version{}, fmt.Errorf("module version %q: an empty prerelease or build metadata part", s)
	}
	v, err := ParseSemver(bare)
	if err != nil {
		return versions.Version{}, fmt.Errorf("module version %q: %w", s, err)
	}
	return v, nil
}

// ParseConstraint parses a version constraint as Terraform writes one
// (constraints.ParseRubyStyleMulti: ">= 5.0, < 6.0", "~> 1.9.0",
// "4.67.0"), made safe: the library panics on a number that does not fit
// in 64 bits, and a constraint may come from a file a stranger wrote (a
// module's .tf, read by sync); that becomes an error here, as does an
// empty constraint.
func ParseConstraint(s string) (spec constraints.IntersectionSpec, err error) {
	defer func() {
		if r := recover(); r != nil {
			spec, err = nil, fmt.Errorf("version constraint %q is out of range", s)
		}
	}()
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("empty version constraint")
	}
	if spec, err = constraints.ParseRubyStyleMulti(s); err != nil {
		return nil, fmt.Errorf("version constraint %q: %v", s, err)
	}
	return spec, nil
}

// ParseModuleConstraint is ParseConstraint of a registry module's version
// constraint, where each version may carry the leading "v" that module
// versions may be spelt with (ParseModuleVersion): Terraform and OpenTofu
// read a module call's version = "~> v1.1" (hashicorp/go-version), and a
// module registry lists "v1.1.0". The "v" is dropped from each part, the
// rest parsed as ParseConstraint parses it.
func ParseModuleConstraint(s string) (constraints.IntersectionSpec, error) {
	parts := strings.Split(s, ",")
	for i, part := range parts {
		rest := strings.TrimLeft(part, " \t")
		op := rest[:len(rest)-len(strings.TrimLeft(rest, "=!<>~^"))]
		num := strings.TrimLeft(rest[len(op):], " \t")
		if bare, ok := strings.CutPrefix(num, "v"); ok && bare != "" && bare[0] >= '0' && bare[0] <= '9' {
			parts[i] = part[:len(part)-len(num)] + bare
		}
	}
	spec, err := ParseConstraint(strings.Join(parts, ","))
	if err != nil {
		if _, orig := ParseConstraint(s); orig != nil {
			return nil, orig // the error names the constraint as written
		}
		return nil, err
	}
	return spec, nil
}
