// Package registryjson holds the JSON documents of the provider registry
// protocol (providers.v1): the versions response of
// GET :namespace/:type/versions and the package response of
// GET :namespace/:type/:version/download/:os/:arch.
//
// It owns the wire shapes only, one definition for every party that speaks
// the protocol: the origin client (package discovery decodes origins'
// answers with them), the fake origin registry of the tests
// (internal/testrig/fakeorigin encodes with them) and any server of the protocol.
// It depends on nothing and validates nothing: whether a document is
// acceptable (required fields, https URLs, the platform asked for) is
// decided by its user, package discovery for origins' answers.
//
// Field names and JSON names follow the protocol as Terraform and OpenTofu
// read it; every field the protocol defines is kept, so that a document
// decoded and encoded again says the same thing.
package registryjson

// Versions is the versions response: every version of one provider.
type Versions struct {
	// Versions lists the provider's versions. A decoder sees nil when the
	// document has no "versions" array (or null); an encoder must set a
	// non-nil slice to write "[]" for a provider without versions.
	Versions []Version `json:"versions"`
	// Warnings are messages for the user (deprecation notices); omitted
	// when there are none.
	Warnings []string `json:"warnings,omitempty"`
}

// Version is one entry of a versions response.
type Version struct {
	// Version is the version string as the registry spells it.
	Version string `json:"version"`
	// Protocols are the plugin protocol versions it supports ("5.0").
	Protocols []string `json:"protocols"`
	// Platforms it has packages for.
	Platforms []Platform `json:"platforms"`
}

// Platform is a target platform of a package.
type Platform struct {
	OS   string `json:"os"`
	Arch string `json:"arch"`
}

// Package is the package (download) response: one version of a provider
// for one platform.
type Package struct {
	Protocols []string `json:"protocols"`
	OS        string   `json:"os"`
	Arch      string   `json:"arch"`
	// Filename is the archive's name as SHA256SUMS records it.
	Filename string `json:"filename"`
	// The URLs may be relative to the package response's URL and may
	// name other hosts (a release CDN).
	DownloadURL         string `json:"download_url"`
	SHASumsURL          string `json:"shasums_url"`
	SHASumsSignatureURL string `json:"shasums_signature_url"`
	// SHASum is the archive's sha256, in hex.
	SHASum      string      `json:"shasum"`
	SigningKeys SigningKeys `json:"signing_keys"`
	// Packages is OpenTofu's addition to the protocol (OpenTofu 1.12,
	// served by registry.opentofu.org): for every platform ("os_arch") of
	// the version, the hashes ("zh:..." and "h1:...") and size of its
	// archive. OpenTofu checks the installed archive against its platform's
	// entry and records every platform's hashes in the lock file;
	// Terraform ignores it. Omitted when empty, as registries without it
	// send nothing.
	Packages map[string]PackageHashes `json:"packages,omitempty"`
}

// PackageHashes is one platform's entry of Package.Packages.
type PackageHashes struct {
	Hashes      []string `json:"hashes"`
	PackageSize int64    `json:"package_size"`
}

// SigningKeys are the keys that may have signed a package's SHA256SUMS.
type SigningKeys struct {
	GPGPublicKeys []GPGPublicKey `json:"gpg_public_keys"`
}

// GPGPublicKey is one OpenPGP public key of a package's signing keys, with
// the registry's statement of who it belongs to.
type GPGPublicKey struct {
	// KeyID is the key's id in hex, as the registry states it.
	KeyID string `json:"key_id"`
	// ASCIIArmor is the ASCII-armored public key.
	ASCIIArmor string `json:"ascii_armor"`
	// TrustSignature is an ASCII-armored signature of the key by a key the
	// registry trusts (partner providers on the public registry); often "".
	TrustSignature string `json:"trust_signature"`
	// Source names the key's owner ("HashiCorp"); SourceURL is a page
	// about it.
	Source    string `json:"source"`
	SourceURL string `json:"source_url"`
}
