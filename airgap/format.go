// Package airgap carries a mirror's cache across an air gap. Export writes
// what the cache holds as a directory (or one tar file) in the layout of
// `terraform providers mirror`, with the origin's evidence beside each zip
// under names no client looks at, registry modules under modules/, and a
// manifest of every file signed by the mirror's export key. Import loads
// such a directory into a cache through the engine's Import, which
// verifies every package again from its evidence.
//
// Trust comes from the operator's keys (Trust), never from the input: a
// provider version is loaded only when the manifest's signer or a key
// pinned for its namespace vouches for it; modules are vouched for by the
// manifest only (modules.go).
//
// It is not a front door and opens no cache of its own: both directions
// work on an engine the caller opened (Engine, what they use of it),
// `tfmirror export` and
// `tfmirror import` on their own or a running `tfmirror serve` through its
// admin API (package admin), so the work has one code path.
package airgap

import (
	"fmt"
	"strings"

	"github.com/tfmirror/tfmirror/v2/discovery/registryjson"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
)

// Engine is what export and import use of the engine: the cached
// provider versions, the air-gap side that reads and imports them with
// their evidence, the module side, and the module limits.
// *mirror.Engine implements it. What the package policy lets be served
// an export asks the served layer (Served, CLISide.ServedCLI), never
// the engine.
type Engine interface {
	ListCachedAfter(prefix, after string, fn func(mirror.CachedVersion) error) error
	AirGap() *mirror.AirGap
	Modules() *modules.Modules
	Config() mirror.Config
}

var _ Engine = (*mirror.Engine)(nil)

// evidenceFormat is the layout of the evidence file this release writes.
const evidenceFormat = 1

// evidenceFile is one version's evidence file,
// terraform-provider-TYPE_VERSION_evidence.json.
type evidenceFile struct {
	Format   int    `json:"format"`
	Provider string `json:"provider"`
	Version  string `json:"version"`
	// Unsigned says the version was imported without signature: it has
	// no documents, and importing it needs --allow-unsigned.
	Unsigned  bool                       `json:"unsigned,omitempty"`
	Documents []evidenceDocument         `json:"documents,omitempty"`
	Packages  map[string]evidencePackage `json:"packages"`
}

// evidenceDocument is one SHA256SUMS document, kept in File with its
// signature in SignatureFile (both beside the evidence file).
type evidenceDocument struct {
	File          string                      `json:"file"`
	SignatureFile string                      `json:"signature_file"`
	URL           string                      `json:"url"`
	SignatureURL  string                      `json:"signature_url"`
	SigningKeys   []registryjson.GPGPublicKey `json:"signing_keys"`
}

// evidencePackage is the origin's package metadata of one platform.
type evidencePackage struct {
	// Filename is the origin's, as SHA256SUMS lists it.
	Filename    string   `json:"filename"`
	DownloadURL string   `json:"download_url,omitempty"`
	Protocols   []string `json:"protocols,omitempty"`
	OS          string   `json:"os,omitempty"`
	Arch        string   `json:"arch,omitempty"`
	Shasum      string   `json:"shasum,omitempty"`
	SHA256      string   `json:"sha256"`
	// Packages is the origin's "packages" (OpenTofu's hashes and sizes of
	// every platform's archive), as it gave them; omitted when it gave
	// none, and in files of earlier releases.
	Packages map[string]registryjson.PackageHashes `json:"packages,omitempty"`
	Document int                                   `json:"document"`
}

func evidenceName(typ, version string) string {
	return "terraform-provider-" + typ + "_" + version + "_evidence.json"
}

// sumsNames are the file names of a version's document i and its signature.
func sumsNames(typ, version string, i int) (doc, sig string) {
	doc = "terraform-provider-" + typ + "_" + version + "_SHA256SUMS"
	if i > 0 {
		doc += fmt.Sprintf(".%d", i)
	}
	return doc, doc + ".sig"
}

// IsTarName reports whether path names a tar archive by its suffix.
func IsTarName(path string) bool {
	for _, suffix := range []string{".tar", ".tar.gz", ".tgz"} {
		if strings.HasSuffix(path, suffix) {
			return true
		}
	}
	return false
}
