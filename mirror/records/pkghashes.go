package records

import (
	"fmt"
	"strings"

	"github.com/tfmirror/tfmirror/v2/discovery/registryjson"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// CheckPackageHashes checks OpenTofu's "packages" of one platform's package
// metadata (the hashes of every platform's archive of the version), which
// no signature covers, as far as the mirror can: each zh: hash against the
// sha256 that rel (the signed SHA256SUMS lines the package verified
// against) gives that platform's archive, by its derived name (see
// Release.Archive), and each h1: hash of a platform whose archive is
// cached against the cached archive's h1 (h1 returns it for a sha256, ""
// when it is not cached). filename is the package's own, for messages. A
// zh: hash of a platform that SHA256SUMS has no line for cannot be
// checked and fails with verify.ReasonMissingChecksum; a mismatch fails
// with verify.ReasonChecksum.
func CheckPackageHashes(pkgs map[string]registryjson.PackageHashes, filename string, rel Release, h1 func(sha string) string) error {
	for _, pl := range sortedKeys(pkgs) {
		name, sha, listed := rel.Archive(pl)
		for _, hash := range pkgs[pl].Hashes {
			switch {
			case strings.HasPrefix(hash, "zh:"):
				if !listed {
					return &verify.Error{Reason: verify.ReasonMissingChecksum,
						Detail: fmt.Sprintf("the package metadata of %s gives %s for %s, whose archive SHA256SUMS has no line for", filename, hash, pl)}
				}
				if !strings.EqualFold(hash[len("zh:"):], sha) {
					return &verify.Error{Reason: verify.ReasonChecksum,
						Detail: fmt.Sprintf("the package metadata of %s gives %s for %s, SHA256SUMS says sha256 %s for %s", filename, hash, pl, sha, name)}
				}
			case strings.HasPrefix(hash, "h1:") && listed && h1 != nil:
				if want := h1(sha); want != "" && hash != want {
					return &verify.Error{Reason: verify.ReasonChecksum,
						Detail: fmt.Sprintf("the package metadata of %s gives %s for %s, the cached archive %s has %s", filename, hash, pl, name, want)}
				}
			}
		}
	}
	return nil
}
