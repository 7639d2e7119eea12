package records

import (
	"errors"
	"fmt"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery/registryjson"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// Evidence is what the origin gave for one verified version and the
// platforms asked for, byte for byte: the SHA256SUMS documents with their
// signatures and signing keys, and each platform's package metadata. Its
// slices are shared and must not be modified.
type Evidence struct {
	// Provider and Version (canonical) are the version's.
	Provider addrs.Provider
	Version  string
	// Documents are the version's SHA256SUMS documents that verified;
	// a Platform refers to its own by index (usually all to the only one).
	Documents []SumsDocument
	// Platforms are the verified packages of the platforms asked for that
	// have one, in the order asked.
	Platforms []PlatformEvidence
	// VerifiedAt is when the record was last verified and stored.
	VerifiedAt time.Time
	// Stale says the version list that named the version's platforms was
	// served from the cache because the origin failed.
	Stale bool
	// Provenance says whether the version came from the origin or an
	// import.
	Provenance Provenance
}

// PlatformEvidence is the origin's package metadata of one platform, as
// its package response gave it (URLs made absolute), and the sha256 the
// mirror verified.
type PlatformEvidence struct {
	Platform  string // os_arch
	Protocols []string
	OS, Arch  string
	Filename  string
	// DownloadURL is the origin's download_url.
	DownloadURL string
	// Shasum is the origin's shasum as it wrote it; SHA256 is the same
	// checksum as SHA256SUMS states it (lowercase hex), the archive's.
	Shasum string
	SHA256 string
	// Packages is the origin's "packages", as it gave them (nil: none).
	Packages map[string]registryjson.PackageHashes
	// Document is the index in Evidence.Documents of the SHA256SUMS
	// document (with its signature and keys) that verified this package;
	// -1 for a package imported without signature (see Stored).
	Document int
}

// Platform returns the evidence of platform pl (os_arch), if e has it.
func (e *Evidence) Platform(pl string) (PlatformEvidence, bool) {
	for _, pe := range e.Platforms {
		if pe.Platform == pl {
			return pe, true
		}
	}
	return PlatformEvidence{}, false
}

// Package returns the origin's package response for platform pl as the
// origin gave it, with the origin's absolute URLs: a provider-registry
// front door replaces DownloadURL, SHASumsURL and SHASumsSignatureURL with
// its own and serves the rest unchanged. The result shares slices with e.
func (e *Evidence) Package(pl string) (registryjson.Package, bool) {
	pe, ok := e.Platform(pl)
	if !ok {
		return registryjson.Package{}, false
	}
	doc := e.Documents[pe.Document]
	return registryjson.Package{
		Protocols:           pe.Protocols,
		OS:                  pe.OS,
		Arch:                pe.Arch,
		Filename:            pe.Filename,
		DownloadURL:         pe.DownloadURL,
		SHASumsURL:          doc.URL,
		SHASumsSignatureURL: doc.SignatureURL,
		SHASum:              pe.Shasum,
		SigningKeys:         registryjson.SigningKeys{GPGPublicKeys: doc.SigningKeys},
		Packages:            pe.Packages,
	}, true
}

// EvidenceOf returns the evidence in rec of the platforms in need.
func EvidenceOf(p addrs.Provider, rec *PackageRecord, need []string) *Evidence {
	ev := &Evidence{Provider: p, Version: rec.Version, Documents: rec.Documents,
		Platforms: make([]PlatformEvidence, 0, len(need)), VerifiedAt: rec.VerifiedAt, Provenance: rec.Provenance}
	for _, pl := range need {
		a, ok := rec.Archives[pl]
		if !ok {
			continue
		}
		pe := PlatformEvidence{Platform: pl, Filename: a.Filename, DownloadURL: a.URL, SHA256: a.SHA256, Document: -1}
		if e := a.Evidence; e != nil {
			pe.Protocols, pe.OS, pe.Arch, pe.Shasum, pe.Document = e.Protocols, e.OS, e.Arch, e.Shasum, e.Document
			pe.Packages = e.Packages
		}
		ev.Platforms = append(ev.Platforms, pe)
	}
	return ev
}

// ReasonOf is the verification failure reason of err, for metrics and
// logs: its *verify.Error's, or "unknown".
func ReasonOf(err error) string {
	var verr *verify.Error
	if errors.As(err, &verr) {
		return string(verr.Reason)
	}
	return "unknown"
}

// verifyEvidence is checkEvidence's check, without remembering, of rec
// as the record of version v of a provider of type typ: each document's
// signature (verify.CheckSignature: a key that has expired since it
// signed still verifies it), that it is the release's
// (ReleaseOf), and each archive's
// names and sha256 against it (CheckStoredNames) and its "packages".
func (rec *PackageRecord) VerifyEvidence(typ string, v versions.Version) error {
	rels := make([]Release, len(rec.Documents))
	for i, doc := range rec.Documents {
		if err := verify.CheckSignature(doc.Content, doc.Signature, ArmoredKeys(doc.SigningKeys)); err != nil {
			return err
		}
		parsed, err := verify.ParseSHA256SUMS(doc.Content)
		if err != nil {
			return err
		}
		if rels[i], err = ReleaseOf(typ, v, parsed); err != nil {
			return err
		}
	}
	for _, pl := range sortedKeys(rec.Archives) {
		a := rec.Archives[pl]
		if a.Evidence == nil || a.Evidence.Document < 0 || a.Evidence.Document >= len(rels) {
			return &verify.Error{Reason: verify.ReasonMissingChecksum,
				Detail: fmt.Sprintf("the stored record of %s refers to no stored SHA256SUMS document", pl)}
		}
		rel := rels[a.Evidence.Document]
		if err := CheckStoredNames(rel, pl, a); err != nil {
			return err
		}
		if err := CheckPackageHashes(a.Evidence.Packages, a.Filename, rel, nil); err != nil {
			return err
		}
	}
	return nil
}
