package addrs

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/apparentlymart/go-versions/versions"
	goversion "github.com/hashicorp/go-version"
)

// ModuleCallVersions are the versions of a registry module that a module
// call's version constraint selects, as Terraform and OpenTofu select
// them when they install the call (their internal/initwd), which is not
// how they read a provider's constraint (ParseConstraint): the
// constraint is read by hashicorp/go-version, whose "~> 1" is ">= 1" and
// whose "= 1.0.0" takes 1.0.0+build.5 too, and a prerelease is taken
// only when the constraint, read by apparentlymart/go-versions, names it
// exactly. The zero value selects every version but prereleases, as a
// call without a version does.
type ModuleCallVersions struct {
	required   goversion.Constraints
	prerelease versions.Set // the prereleases the constraint names exactly
	given      bool
}

// versionIn finds the versions of a constraint, as OpenTofu finds them
// to drop their leading "v" when it reads the constraint for
// prereleases.
var versionIn = regexp.MustCompile(goversion.VersionRegexpRaw)

// ParseModuleCallVersions parses a module call's version constraint s as
// the client reads it: dropV says the client is OpenTofu, which reads a
// prerelease's "v1.1.0-beta1" as "1.1.0-beta1" where Terraform takes no
// prerelease by such a constraint. It refuses what the clients refuse,
// as hashicorp/go-version does, and an empty constraint.
func ParseModuleCallVersions(s string, dropV bool) (mv ModuleCallVersions, err error) {
	if strings.TrimSpace(s) == "" {
		return mv, fmt.Errorf("empty version constraint")
	}
	required, err := goversion.NewConstraint(s)
	if err != nil {
		return mv, fmt.Errorf("version constraint %q: %v", s, err)
	}
	mv = ModuleCallVersions{required: required, prerelease: versions.None, given: true}
	text := required.String()
	set, err := prereleasesNamed(text)
	if err != nil && dropV {
		if stripped := versionIn.ReplaceAllStringFunc(text, func(v string) string { return strings.TrimPrefix(v, "v") }); stripped != text {
			set, err = prereleasesNamed(stripped)
		}
	}
	if err == nil { // else none: the clients skip a prerelease they cannot judge
		mv.prerelease = set
	}
	return mv, nil
}

// prereleasesNamed is the set of versions the constraint text selects as
// apparentlymart/go-versions reads it (npm's syntax, not Ruby's: the
// clients read it so for prereleases), made safe: the library panics on
// a number past 64 bits.
func prereleasesNamed(text string) (set versions.Set, err error) {
	defer func() {
		if r := recover(); r != nil {
			set, err = versions.None, fmt.Errorf("version constraint %q is out of range", text)
		}
	}()
	return versions.MeetingConstraintsString(text)
}

// Has reports whether the call selects v.
func (m ModuleCallVersions) Has(v versions.Version) bool {
	if !m.given {
		return v.Prerelease == ""
	}
	gv, err := goversion.NewVersion(v.String())
	if err != nil {
		return false
	}
	if gv.Prerelease() != "" && !m.prerelease.Has(v) {
		return false
	}
	return m.required.Check(gv)
}
