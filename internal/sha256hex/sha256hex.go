// Package sha256hex owns one check: whether a string is a sha256 digest
// in the form tfmirror keys and compares archives by, 64 lowercase hex
// digits. The cache, the shared store, the engine and the verification of
// origin documents all check with it, so that they agree on what a
// digest is. It knows nothing of where the string came from.
package sha256hex

// Valid reports whether s is 64 lowercase hex digits. Callers reading a
// format that allows uppercase (SHA256SUMS) lowercase first.
func Valid(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
