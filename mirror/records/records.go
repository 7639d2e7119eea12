package records

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery/registryjson"
)

// Schema is the layout of the stored records (VersionList,
// PackageRecord) this engine writes. A record of a later schema (written
// by a newer tfmirror sharing the cache) is treated as absent.
//
//   - 0 (records stored before the field existed) and 1: no evidence.
//   - 2: a PackageRecord keeps the origin's signed evidence (its
//     SHA256SUMS documents with their signatures and signing keys, and
//     every platform's package metadata), and a VersionEntry the
//     version's protocols.
//
// Records of an earlier schema are still read and served, but are
// refreshed from the origin on first use (see EvidenceSchema).
const Schema = 2

// EvidenceSchema is the first schema whose records hold the origin's
// evidence. An older version list is refreshed as if it had expired, an
// older package record is fetched and verified again (see packageFor);
// either is served as it is when that fails, and offline.
const EvidenceSchema = 2

// MaxClockSkew is how far in the future a stored record's time may be
// and the record still be fresh (Fresh): a record written before the
// clock was set back, by as much as this, stays fresh this much longer
// at most; one dated further ahead (a clock that was set years forward
// and back) is taken as expired, so that it is refreshed and stamped
// anew, rather than kept fresh until the clock catches up with it.
const MaxClockSkew = 24 * time.Hour

// Fresh reports whether a record stored (or a finding made) at at is
// still fresh at now, for ttl: less than ttl old, and not dated more
// than MaxClockSkew in the future.
func Fresh(now, at time.Time, ttl time.Duration) bool {
	age := now.Sub(at)
	return age < ttl && age > -MaxClockSkew
}

// KnownSchema reports whether a stored record of schema n can be read.
func KnownSchema(n int) bool { return n <= Schema }

// Listing is a record of an origin's version listing (VersionList,
// ModuleVersionList): the stored sources read each of their copies of one
// into a record of its kind and keep the one listed last
// (mirror/stored.Source.Newest).
type Listing interface {
	// Listed returns when the origin was asked for the listing (zero when
	// the record does not say: its time of storing tells) and whether the
	// record is a listing this release reads: of a schema it knows, and
	// made by a listing of the origin (not by an import alone:
	// VersionList.ImportOnly).
	Listed() (at time.Time, readable bool)
	// Empty returns a new record of the same kind, to read another copy
	// into.
	Empty() Listing
}

// Listed is when the provider's origin was listed, and whether the
// record's schema is known and a listing of the origin is behind it (not
// ImportOnly).
func (l *VersionList) Listed() (time.Time, bool) {
	return l.ListedAt, KnownSchema(l.Schema) && !l.ImportOnly
}

// ListingTime is when the listing behind l was taken, l stored at
// storedAt: ListedAt, else its time of storing, for a list of an earlier
// release, which did not keep it; zero for one an import of an earlier
// release wrote, which no listing need be behind.
func (l *VersionList) ListingTime(storedAt time.Time) time.Time {
	if l.ListedAt.IsZero() && !l.Imported {
		return storedAt.UTC()
	}
	return l.ListedAt
}

// Empty returns a new, empty VersionList.
func (*VersionList) Empty() Listing { return new(VersionList) }

// VersionList is a provider's version list as cached: refreshed after
// VersionsTTL, served stale when a refresh fails. Lists handed out by the
// engine are shared and must not be modified.
type VersionList struct {
	// Schema is the record's layout (Schema when written).
	Schema   int            `json:"schema"`
	Versions []VersionEntry `json:"versions"`
	// Imported says Import added versions to the list: it is refreshed
	// from the origin on next use (when the host is an origin and the
	// mirror is not sealed), as the origin's list may have more.
	Imported bool `json:"imported,omitempty"`
	// ImportOnly says Import made the list where the cache held none of
	// its own, or a removal (mirror/inventory.Inventory.RemoveVersion)
	// stored the shared tier's list it served without the version: no
	// listing of the origin by this replica is behind it (the shared
	// tier's list it added to or took from, if any, is another
	// replica's), and it is none for the release dating (Listed,
	// mirror/gate), so that the first listing of the origin after it is
	// a first listing, or takes the tier's list for the one before it.
	// False in lists of earlier releases, an import's too (taken for
	// listings, as then).
	ImportOnly bool `json:"import_only,omitempty"`
	// ImportAdded are the versions Import added to a list a listing of
	// the origin made (this replica's, or, ImportOnly, the shared tier's
	// list it added to: ListedAt is that listing's time) that the
	// listing did not name (in its Versions or its Lacked): the release
	// dating does not take them for versions of that listing (Named),
	// which lacked them, and dates them by its time.
	ImportAdded []string `json:"import_added,omitempty"`
	// InHouse are the versions of the list imported without signature
	// under an allowed origin that takes them (mirror/unsigned): served
	// through the network mirror, and left out of the provider registry
	// protocol's answer, which gives the publisher's signature. Set on
	// the list served, never stored.
	InHouse []string `json:"-"`
	// ListedAt is when the origin was asked for the list, by the
	// engine's clock; zero in lists stored before it was kept (their
	// time of storing tells). An import that adds to the list keeps it
	// (or the time of storing that told it, but in a list an import of
	// an earlier release wrote), and one that adds to the shared tier's
	// list takes that list's; zero in a list an import made from
	// nothing.
	ListedAt time.Time `json:"listed_at,omitzero"`
	// Lacked are the versions the listing before this one named (its
	// Versions and its Lacked) that this one lacks (see Lacking), and
	// those of this one that a removal took off the list since
	// (mirror/inventory.Inventory.RemoveVersion), which it named all
	// the same. Never served.
	Lacked []string `json:"lacked,omitempty"`
	// Dates is the release dating (mirror/gate) of the versions the list
	// names (its Versions and its Lacked) that its writer knew one for: the
	// time of the latest listing that lacked each, by canonical version.
	// Authenticated with the list, it dates them where the dating records
	// are gone (mirror/gate.Gate.ListingDates). Never served; nil in lists
	// of earlier releases, never in one written by a release that dates
	// (an empty map where it knows none), which tells them apart.
	Dates map[string]time.Time `json:"dates"`
	// Warnings are the origin's with the list (a deprecation notice),
	// which the provider registry door passes on, as Terraform prints
	// them on a direct install (discovery.VersionList.Warnings).
	Warnings []string `json:"warnings,omitempty"`
	// Held says, for the people who asked, why versions the package
	// policy holds back are left out of the list (never stored).
	Held []string `json:"-"`
}

// WithVersions is a copy of l with versions vs in place of its own, and
// all else l says of them (when it was listed, the origin's warnings, the
// policy's messages): what a layer that leaves versions out of a list
// answers, or a list stored again without one.
func (l *VersionList) WithVersions(vs []VersionEntry) *VersionList {
	c := *l
	c.Versions = vs
	c.Held = slices.Clip(l.Held) // appended to by the copy's owner alone
	return &c
}

// VersionEntry is one version of a provider and the platforms the origin
// lists for it.
type VersionEntry struct {
	// Version is the canonical form clients use.
	Version string `json:"version"`
	// Origin is the string the origin used, when it differs ("1.2").
	Origin string `json:"origin,omitempty"`
	// Aliases are the origin's other spellings of the version, to ask
	// for a platform the first has no package for ("1.0" beside "1.0.0").
	Aliases []string `json:"aliases,omitempty"`
	// Protocols are the plugin protocol versions the origin lists for the
	// version ("5.0"), in its order (those of every spelling, each once).
	// Nil in lists stored before schema 2.
	Protocols []string `json:"protocols,omitempty"`
	Platforms []string `json:"platforms"`
}

// Find returns the entry of version v, if the list has it.
func (l *VersionList) Find(v versions.Version) (VersionEntry, bool) {
	want := v.String()
	for _, e := range l.Versions {
		if e.Version == want {
			return e, true
		}
	}
	return VersionEntry{}, false
}

// originVersion is the version string to use in origin requests.
func (e VersionEntry) OriginVersion() string {
	if e.Origin != "" {
		return e.Origin
	}
	return e.Version
}

// Names are the versions of the list, in its order (nil for a nil list).
func (l *VersionList) Names() []string {
	if l == nil {
		return nil
	}
	out := make([]string, len(l.Versions))
	for i, e := range l.Versions {
		out[i] = e.Version
	}
	return out
}

// Named are the versions the listing names for the release dating
// (mirror/gate): its Names but those an import added (ImportAdded), then
// its Lacked; nil for a nil list, never nil for another.
func (l *VersionList) Named() []string {
	if l == nil {
		return nil
	}
	names := l.Names()
	if len(l.ImportAdded) > 0 {
		added := make(map[string]bool, len(l.ImportAdded))
		for _, v := range l.ImportAdded {
			added[v] = true
		}
		names = slices.DeleteFunc(names, func(v string) bool { return added[v] })
	}
	return append(names, l.Lacked...)
}

func VersionsKey(p addrs.Provider) string { return VersionsKeyOf(p.String()) }

// VersionsKeyOf is VersionsKey of the provider whose address is name
// (Provider.String()).
func VersionsKeyOf(name string) string { return "versions/" + name }

// PackageRecord is the verified metadata of one provider version: for
// each platform, the origin's package metadata and the sha256 of its
// archive, checked against a SHA256SUMS document whose signature verified,
// with that document, its signature and the signing keys kept as the
// origin gave them (the evidence). Once stored its archives never change,
// except that platforms not yet fetched may be added, and platforms the
// origin had no package for are asked for again (see believedMissing) and
// may then be added.
//
// A record of a schema before EvidenceSchema (written by an earlier
// release) has no Documents, and Archives without Evidence.
type PackageRecord struct {
	// Schema is the record's layout (Schema when written).
	Schema  int    `json:"schema"`
	Version string `json:"version"`
	// Sums is the verified content of Documents: file name -> sha256.
	Sums map[string]string `json:"sums"`
	// Documents are the version's SHA256SUMS documents that verified, each
	// with its signature and keys; usually one. Only appended to, so an
	// ArchiveRecord's Document index stays valid.
	Documents []SumsDocument `json:"documents,omitempty"`
	// Archives are the verified packages by os_arch.
	Archives map[string]ArchiveRecord `json:"archives"`
	// Missing are platforms the origin listed but has no package for.
	Missing []string `json:"missing,omitempty"`
	// MissingChecked says when each platform in Missing was last found
	// missing. A platform without an entry (records stored before it was
	// kept) is asked for again.
	MissingChecked map[string]MissingCheck `json:"missing_checked,omitempty"`
	VerifiedAt     time.Time               `json:"verified_at"`
	// Provenance says where the record came from (ProvenanceOrigin,
	// ProvenanceImported, ProvenanceUnsigned).
	Provenance Provenance `json:"provenance,omitempty"`
	// Withheld is a version imported without signature under this
	// allowed origin host (by an earlier release) and withheld (see
	// mirror/unsigned), set aside when the origin's own version of the same
	// number was fetched and verified into this record: kept, as it
	// cannot be fetched again (retention never evicts its archives), and
	// never served.
	Withheld *PackageRecord `json:"withheld,omitempty"`

	// evidenceChecked says the engine's check of the stored evidence
	// passed for this record as it is in memory (never stored).
	evidenceChecked atomic.Bool
}

// EvidenceChecked says MarkEvidenceChecked was called on rec: its stored
// evidence passed its check since it was read from the cache.
func (rec *PackageRecord) EvidenceChecked() bool { return rec.evidenceChecked.Load() }

// MarkEvidenceChecked remembers, in memory only, that rec's stored
// evidence passed its check.
func (rec *PackageRecord) MarkEvidenceChecked() { rec.evidenceChecked.Store(true) }

// Provenance says how a version's packages reached the cache.
type Provenance string

const (
	// ProvenanceOrigin: fetched from the origin and verified against its
	// signed SHA256SUMS.
	ProvenanceOrigin Provenance = ""
	// ProvenanceImported: loaded by Import from an export and verified
	// against the origin's signed SHA256SUMS that came with it.
	ProvenanceImported Provenance = "imported"
	// ProvenanceUnsigned: loaded by Import without any signature
	// (Imported.Unsigned): checked only against the h1: hashes given with
	// it, if any. Such a version has no evidence and is never completed
	// from an origin.
	ProvenanceUnsigned Provenance = "imported without signature"
)

func (pr Provenance) String() string {
	if pr == ProvenanceOrigin {
		return "origin"
	}
	return string(pr)
}

// hasEvidence reports whether rec keeps the origin's evidence for every
// archive in it (every record of EvidenceSchema or later does).
func (rec *PackageRecord) HasEvidence() bool { return rec.Schema >= EvidenceSchema }

// SumsDocument is one SHA256SUMS document of a version, byte for byte as
// the origin served it, with its detached signature and the signing keys
// the origin's package metadata gave, one of which verified the signature.
type SumsDocument struct {
	// URL and SignatureURL are the origin's shasums_url and
	// shasums_signature_url, absolute.
	URL          string `json:"url"`
	SignatureURL string `json:"signature_url"`
	// Content is the SHA256SUMS document.
	Content []byte `json:"content"`
	// Signature is the detached signature over Content (binary or
	// ASCII-armored, as the origin served it).
	Signature []byte `json:"signature"`
	// SigningKeys are the origin's signing_keys.gpg_public_keys for the
	// packages that refer to this document, every field as given.
	SigningKeys []registryjson.GPGPublicKey `json:"signing_keys"`
}

// MissingCheck is one finding that the origin has no package for a platform.
type MissingCheck struct {
	At time.Time `json:"at"` // by Config.Now
	// List is when the version list in the cache then was stored (zero
	// when there was none): the finding holds for that list only.
	List time.Time `json:"list"`
}

// ArchiveRecord is the verified package of one platform: the origin's
// file name and download URL, the sha256 of the archive, and the rest of
// the origin's package metadata. It is comparable: Evidence is shared,
// never modified.
type ArchiveRecord struct {
	// Filename is the archive's name as SHA256SUMS records it.
	Filename string `json:"filename"`
	// URL is the origin's download_url, absolute.
	URL string `json:"url"`
	// SHA256 is the archive's verified sha256, lowercase hex (the line of
	// Filename in the SHA256SUMS document).
	SHA256 string `json:"sha256"`
	// Evidence is the rest of the origin's package metadata and which
	// SHA256SUMS document verified it; nil in records of a schema before
	// EvidenceSchema. Shared: do not modify.
	Evidence *PackageEvidence `json:"evidence,omitempty"`
}

// PackageEvidence is what the origin's package metadata for one platform
// said besides the file name and download URL (kept in ArchiveRecord),
// as it said it, and the SHA256SUMS document that verified it.
type PackageEvidence struct {
	// Protocols, OS and Arch are the origin's protocols, os and arch.
	Protocols []string `json:"protocols"`
	OS        string   `json:"os"`
	Arch      string   `json:"arch"`
	// Shasum is the origin's shasum, as it wrote it.
	Shasum string `json:"shasum"`
	// Packages is the origin's "packages" (OpenTofu's hashes and sizes
	// of every platform's archive of the version), as it gave them, once
	// checked by CheckPackageHashes; omitted when it gave none, and in
	// records stored before it was kept.
	Packages map[string]registryjson.PackageHashes `json:"packages,omitempty"`
	// Document is the index in PackageRecord.Documents of the SHA256SUMS
	// document that verified this package.
	Document int `json:"document"`
}

// covers reports whether rec has an answer for every platform in need:
// an archive, or a finding that it is missing that missing believes.
func (rec *PackageRecord) Covers(need []string, missing func(pl string) bool) bool {
	for _, pl := range need {
		if _, ok := rec.Archives[pl]; !ok && !missing(pl) {
			return false
		}
	}
	return true
}

func PackageKey(p addrs.Provider, v versions.Version) string {
	return "package/" + p.String() + "/" + v.String()
}

// ProviderKeys are a provider's address and the keys of its records,
// spelled once for a request and handed down to what reads and writes
// them (VersionsKey).
type ProviderKeys struct {
	Provider addrs.Provider
	Name     string // Provider.String()
	Versions string // VersionsKey(Provider)
}

// KeysOf returns p's keys.
func KeysOf(p addrs.Provider) ProviderKeys {
	name := p.String()
	return ProviderKeys{Provider: p, Name: name, Versions: VersionsKeyOf(name)}
}

// VersionKeys are a provider version and the keys of its records, spelled
// once for a request (PackageKey, and the provider's).
type VersionKeys struct {
	ProviderKeys
	Version versions.Version
	Package string // PackageKey(Provider, Version)
}

// Of returns the keys of version v of the provider.
func (k ProviderKeys) Of(v versions.Version) VersionKeys {
	return VersionKeys{ProviderKeys: k, Version: v, Package: "package/" + k.Name + "/" + v.String()}
}

// clone returns a deep copy of rec, for adding platforms.
func (rec *PackageRecord) Clone() *PackageRecord {
	c := PackageRecord{
		Schema:         Schema,
		Version:        rec.Version,
		Sums:           maps.Clone(rec.Sums),
		Documents:      slices.Clone(rec.Documents),
		Archives:       maps.Clone(rec.Archives),
		Missing:        slices.Clone(rec.Missing),
		MissingChecked: maps.Clone(rec.MissingChecked),
		VerifiedAt:     rec.VerifiedAt,
		Provenance:     rec.Provenance,
		Withheld:       rec.Withheld, // never modified
	}
	if c.Sums == nil {
		c.Sums = map[string]string{}
	}
	if c.Archives == nil {
		c.Archives = map[string]ArchiveRecord{}
	}
	return &c
}

// archive returns the archive record of platform pl; none when rec is nil.
func (rec *PackageRecord) Archive(pl string) (ArchiveRecord, bool) {
	if rec == nil {
		return ArchiveRecord{}, false
	}
	a, ok := rec.Archives[pl]
	return a, ok
}

// ArmoredKeys returns the ASCII-armored public keys of keys.
func ArmoredKeys(keys []registryjson.GPGPublicKey) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.ASCIIArmor
	}
	return out
}

// Summary is what VersionOfRecord reads of a PackageRecord: not
// the evidence documents.
type Summary struct {
	Schema   int    `json:"schema"`
	Version  string `json:"version"`
	Archives map[string]struct {
		// URL is "" for a package that came by import, which cannot
		// be fetched again.
		URL    string `json:"url"`
		SHA256 string `json:"sha256"`
	} `json:"archives"`
	Provenance Provenance `json:"provenance,omitempty"`
	Withheld   *struct {
		Archives map[string]struct {
			SHA256 string `json:"sha256"`
		} `json:"archives"`
	} `json:"withheld,omitempty"`
}

// PackageSummary decodes raw, the package record stored under key, and
// the provider the key names; false for what is not a package record of
// a known schema.
func PackageSummary(key string, raw json.RawMessage) (addrs.Provider, Summary, bool) {
	var rec Summary
	if json.Unmarshal(raw, &rec) != nil || !KnownSchema(rec.Schema) {
		return addrs.Provider{}, rec, false
	}
	p, ok := ParseProviderKey(strings.TrimSuffix(strings.TrimPrefix(key, "package/"), "/"+rec.Version))
	return p, rec, ok
}

// ParseProviderKey parses HOST/NAMESPACE/TYPE as the engine writes it in
// its keys: the host in its normal form (punycode for an IDN host), read
// by addrs.ParseHost.
func ParseProviderKey(s string) (addrs.Provider, bool) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
		return addrs.Provider{}, false
	}
	h, err := addrs.ParseHost(parts[0])
	if err != nil {
		return addrs.Provider{}, false
	}
	return addrs.Provider{Hostname: h, Namespace: parts[1], Type: parts[2]}, true
}

// ImportedHostPrefix keys the record of a host Import loaded providers of.
const ImportedHostPrefix = "imported-host/"

// Limits for the checksum documents of a provider version: what the
// origin path and an import read whole of it.
const (
	MaxSumsBytes      = 1 << 20
	MaxSignatureBytes = 64 << 10
)

func sortedKeys[M ~map[string]V, V any](m M) []string {
	return slices.Sorted(maps.Keys(m))
}
