package mirror

import (
	"fmt"
	"strings"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/discovery"
)

// maxPlatformLen bounds each word of an os_arch platform name.
const maxPlatformLen = 32

// ParseSemver is versions.ParseVersion made strict and safe. The library
// panics on a numeric part that does not fit in 64 bits, and both request
// paths and origin answers can carry such a part; it also accepts
// prerelease and build parts that semantic versioning forbids, such as
// "1.0.0+." or "1.0.0-a..b". Both become errors here.
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

// ParsePlatform parses "os_arch": two words of lowercase letters and digits.
func ParsePlatform(s string) (discovery.Platform, error) {
	goos, arch, ok := strings.Cut(s, "_")
	if !ok || !validPlatformWord(goos) || !validPlatformWord(arch) {
		return discovery.Platform{}, fmt.Errorf("invalid platform %q (want os_arch, such as linux_amd64)", s)
	}
	return discovery.Platform{OS: goos, Arch: arch}, nil
}

func validPlatformWord(s string) bool {
	if s == "" || len(s) > maxPlatformLen {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// ArchiveName is the file name of a provider package,
// terraform-provider-TYPE_VERSION_OS_ARCH.zip: the origins' name for it
// and the layout `terraform providers mirror` writes, which the mirror's
// answers and exports follow. platform is "os_arch".
func ArchiveName(typ, version, platform string) string {
	return archivePrefix + typ + "_" + version + "_" + platform + ".zip"
}

const archivePrefix = "terraform-provider-"

// ParseArchiveName is the inverse of ArchiveName for a provider of type
// typ: whatever it accepts, ArchiveName of the parts gives back exactly.
// The version is returned as written (non-empty and without "_", which
// no version has, for the caller to parse), the platform parsed by
// ParsePlatform.
func ParseArchiveName(typ, name string) (version string, pl discovery.Platform, err error) {
	prefix := archivePrefix + typ + "_"
	rest, ok := strings.CutPrefix(name, prefix)
	if ok {
		rest, ok = strings.CutSuffix(rest, ".zip")
	}
	if !ok {
		return "", pl, fmt.Errorf("archive name %q does not match %sVERSION_OS_ARCH.zip", name, prefix)
	}
	// Versions never contain "_", so the last two separate OS and arch.
	i := strings.LastIndexByte(rest, '_')
	j := -1
	if i > 0 {
		j = strings.LastIndexByte(rest[:i], '_')
	}
	if j < 0 {
		return "", pl, fmt.Errorf("archive name %q has no platform", name)
	}
	if j == 0 {
		return "", pl, fmt.Errorf("archive name %q has no version", name)
	}
	if strings.Contains(rest[:j], "_") {
		return "", pl, fmt.Errorf("archive name %q has a version with \"_\", which versions never have", name)
	}
	if pl, err = ParsePlatform(rest[j+1:]); err != nil {
		return "", pl, fmt.Errorf("archive name %q: %w", name, err)
	}
	return rest[:j], pl, nil
}
