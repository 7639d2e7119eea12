package records

import (
	"fmt"
	"strings"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// A signature vouches for the names it signed, and for nothing else. The
// publisher's signature covers a SHA256SUMS document: file names and
// their sha256s. It does not cover what an origin's package answer or an
// import's evidence file says around it (the filename, os and arch of a
// platform's package, the version a document is "for"). So the engine
// never reads an archive's name from them: it derives the name from the
// provider type, the version and the platform being stored
// (addrs.ArchiveName), looks that name up in the signed document, and refuses a
// package whose answer or evidence says another filename, os or arch
// (verify.ReasonName), on every path that stores or re-checks a signed
// record: Import (every import path), the origin path (fetchPackage), and
// the checks of stored records (checkEvidence, the shared tier's
// records, verifyCached).
//
// The document itself must be the one of that provider type and version:
// every line that names a file of a provider release,
// "terraform-provider-TYPE_VERSION_REST" with TYPE, VERSION and REST
// non-empty (the archives, OS_ARCH.zip, and what real registries list
// beside them, such as "manifest.json"), names one of that TYPE, and all
// of them one and the same VERSION, which must be a spelling of the
// version the record is stored under (addrs.ParseSemver gives that
// version back; in practice the same string, but an origin that lists
// "1.0" for 1.0.0 names its files "_1.0_", and the mirror serves them as
// 1.0.0). A document with a line of another type or another version, or
// with no line of a release, is refused whole. Types and versions never
// contain "_", so each ends at the first "_" after it. Lines of no
// release's shape (a release tool's source archive
// "terraform-provider-TYPE-VERSION.tar.gz", an SBOM
// "terraform-provider-TYPE_VERSION.sbom.json") are left out of the
// release: no name the engine derives has that shape, so they vouch for
// nothing it looks up, and Terraform installs such a release directly.

// Release are the lines of a SHA256SUMS document that verified and
// that ReleaseOf found to be those of one release of one provider type.
type Release struct {
	typ string
	// spelling is the release's version as the document spells it.
	spelling string
	// lines are the document's lines: file name -> sha256 (lowercase).
	lines map[string]string
}

// ReleaseOf checks that lines, a SHA256SUMS document's (see
// verify.ParseSHA256SUMS), are those of version v of provider type typ
// (see above), and returns them so. Errors: a *verify.Error of
// ReasonName naming a line at fault; of ReasonMissingChecksum for a
// document without lines.
func ReleaseOf(typ string, v versions.Version, lines map[string]string) (Release, error) {
	spelling, first := "", ""
	own := make(map[string]string, len(lines))
	for _, name := range sortedKeys(lines) {
		rest, ok := strings.CutPrefix(name, addrs.ArchivePrefix)
		t, rest, cutType := strings.Cut(rest, "_")
		s, tail, cutVersion := strings.Cut(rest, "_")
		if !ok || !cutType || !cutVersion || t == "" || s == "" || tail == "" {
			continue // of no release's shape: see above
		}
		if t != typ {
			return Release{}, &verify.Error{Reason: verify.ReasonName,
				Detail: fmt.Sprintf("SHA256SUMS lists %s, which is no file of a release of %s%s", name, addrs.ArchivePrefix, typ)}
		}
		own[name] = lines[name]
		switch {
		case spelling == "":
			spelling, first = s, name
		case s != spelling:
			return Release{}, &verify.Error{Reason: verify.ReasonName,
				Detail: fmt.Sprintf("SHA256SUMS lists files of two releases, %s and %s", first, name)}
		}
	}
	if spelling == "" {
		return Release{}, &verify.Error{Reason: verify.ReasonMissingChecksum,
			Detail: fmt.Sprintf("SHA256SUMS lists no file of a release of %s%s", addrs.ArchivePrefix, typ)}
	}
	if sv, err := addrs.ParseSemver(spelling); err != nil || sv.String() != v.String() {
		return Release{}, &verify.Error{Reason: verify.ReasonName,
			Detail: fmt.Sprintf("SHA256SUMS is of %s%s %s (it lists %s), not of version %s", addrs.ArchivePrefix, typ, spelling, first, v)}
	}
	return Release{typ: typ, spelling: spelling, lines: own}, nil
}

// archive returns the name of platform pl's archive in the release,
// derived, and its sha256; ok is false when the document has no line for
// it.
func (r Release) Archive(pl string) (name, sha string, ok bool) {
	name = addrs.ArchiveName(r.typ, r.spelling, pl)
	sha, ok = r.lines[name]
	return name, sha, ok
}

// signedPackage checks what a package answer or an evidence file says of
// platform pl's package against the release: its filename, os and arch
// must be the platform's (filename exactly the derived name), and its
// shasum that name's line. It returns the derived name and the signed
// sha256. Errors: a *verify.Error of ReasonName when a name is not the
// platform's, ReasonMissingChecksum when the document has no line for
// the platform, ReasonChecksum when the shasum is not the line's.
func (r Release) SignedPackage(pl, filename, goos, arch, shasum string) (name, sha string, err error) {
	platform, err := addrs.ParsePlatform(pl)
	if err != nil {
		return "", "", err
	}
	name, sha, listed := r.Archive(pl)
	if filename != name {
		return "", "", &verify.Error{Reason: verify.ReasonName,
			Detail: fmt.Sprintf("%s is given as the package of %s; the signed name of that package is %s", filename, pl, name)}
	}
	if goos != platform.OS || arch != platform.Arch {
		return "", "", &verify.Error{Reason: verify.ReasonName,
			Detail: fmt.Sprintf("%s is given as the package of os %q, arch %q; it is that of %s", name, goos, arch, pl)}
	}
	if !listed {
		return "", "", &verify.Error{Reason: verify.ReasonMissingChecksum, Detail: fmt.Sprintf("SHA256SUMS has no line for %s", name)}
	}
	if err := verify.VerifySums(r.lines, name, shasum); err != nil {
		return "", "", err
	}
	return name, sha, nil
}

// CheckStoredNames checks a stored record's archive of platform pl, kept
// with evidence, against the release of its document (see ReleaseOf):
// what signedPackage checks, and that the record's sha256 is the line's.
func CheckStoredNames(rel Release, pl string, a ArchiveRecord) error {
	_, sha, err := rel.SignedPackage(pl, a.Filename, a.Evidence.OS, a.Evidence.Arch, a.Evidence.Shasum)
	if err != nil {
		return err
	}
	if !strings.EqualFold(sha, a.SHA256) {
		return &verify.Error{Reason: verify.ReasonChecksum,
			Detail: fmt.Sprintf("the stored record gives sha256 %s for %s, its SHA256SUMS %s", a.SHA256, a.Filename, sha)}
	}
	return nil
}
