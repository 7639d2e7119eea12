package addrs

import (
	"errors"
	"strings"

	svchost "github.com/hashicorp/terraform-svchost"
)

// ParseHost parses a host as svchost.ForComparison does (a person's
// spelling: Unicode, any case, :443 or not) and also in the normal form
// that form returns and Provider.String, Module.String and the records'
// keys write (punycode for IDN labels), which svchost refuses: whatever
// the mirror writes of a host reads back, to the same Hostname. Every
// address parser of this package reads its host with it; other readers
// of a stored or listed host use it too. A host ending in a dot
// (TrailingDot), which svchost lets through, is refused: no front door
// serves it, and one host would have two spellings.
func ParseHost(s string) (svchost.Hostname, error) {
	if TrailingDot(s) {
		return "", errors.New("ends in a dot")
	}
	h, err := svchost.ForComparison(s)
	if err == nil || !hasACELabel(s) {
		return h, err
	}
	// svchost refuses punycode given directly (Terraform's rule, for a
	// readable configuration): read it in its display form, Unicode.
	return svchost.ForComparison(svchost.ForDisplay(s))
}

// TrailingDot reports whether host s (before any port) ends in a dot,
// which svchost lets through ("example.com.", even "a.."): the front
// doors refuse such a host, as one host would have several spellings,
// and what names one (a policy pattern) would match nothing.
func TrailingDot(s string) bool {
	name, _, _ := strings.Cut(s, ":")
	return strings.HasSuffix(name, ".")
}

// hasACELabel reports whether a label of host s (before any port) is in
// punycode ("xn--" in any case).
func hasACELabel(s string) bool {
	name, _, _ := strings.Cut(s, ":")
	for label := range strings.SplitSeq(name, ".") {
		if len(label) >= 4 && strings.EqualFold(label[:4], "xn--") {
			return true
		}
	}
	return false
}
