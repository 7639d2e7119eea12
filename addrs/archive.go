package addrs

import (
	"fmt"
	"strings"
)

// ArchiveName is the file name of a provider package,
// terraform-provider-TYPE_VERSION_OS_ARCH.zip: the origins' name for it
// and the layout `terraform providers mirror` writes, which the mirror's
// answers and exports follow. platform is "os_arch".
func ArchiveName(typ, version, platform string) string {
	return ArchivePrefix + typ + "_" + version + "_" + platform + ".zip"
}

// ArchivePrefix begins the file name of every provider package.
const ArchivePrefix = "terraform-provider-"

// ParseArchiveName is the inverse of ArchiveName for a provider of type
// typ: whatever it accepts, ArchiveName of the parts gives back exactly.
// The version is returned as written (non-empty and without "_", which
// no version has, for the caller to parse), the platform parsed by
// ParsePlatform.
func ParseArchiveName(typ, name string) (version string, pl Platform, err error) {
	prefix := ArchivePrefix + typ + "_"
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
