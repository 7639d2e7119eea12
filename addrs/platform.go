package addrs

import (
	"fmt"
	"strings"
)

// Platform is a target platform: an operating system and an architecture,
// as Go names them.
type Platform struct{ OS, Arch string }

// String returns "os_arch".
func (pl Platform) String() string { return pl.OS + "_" + pl.Arch }

// maxPlatformLen bounds each word of an os_arch platform name.
const maxPlatformLen = 32

// ParsePlatform parses "os_arch": two words of lowercase letters and digits.
func ParsePlatform(s string) (Platform, error) {
	goos, arch, ok := strings.Cut(s, "_")
	if !ok || !validPlatformWord(goos) || !validPlatformWord(arch) {
		return Platform{}, fmt.Errorf("invalid platform %q (want os_arch, such as linux_amd64)", s)
	}
	return Platform{OS: goos, Arch: arch}, nil
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
