package records

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/redact"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// ModuleVersionList is a module's version list as cached.
type ModuleVersionList struct {
	Schema int `json:"schema"`
	// Versions are the origin's version strings, in its order.
	Versions []string `json:"versions"`
	// ListedAt is when the origin was asked for the list, by the
	// engine's clock (zero in lists stored before it was kept).
	ListedAt time.Time `json:"listed_at,omitzero"`
	// Lacked are the versions the listing before this one named (its
	// Versions and its Lacked) that this one lacks: see Lacking. Never
	// served.
	Lacked []string `json:"lacked,omitempty"`
	// Dates is the release dating of the versions the list names, as
	// VersionList.Dates.
	Dates map[string]time.Time `json:"dates"`
	// Held says why versions the package policy holds back are left out
	// (never stored).
	Held []string `json:"-"`
}

// Named are the versions the listing names for the release dating
// (mirror/gate): its Versions, then its Lacked; never nil.
func (l *ModuleVersionList) Named() []string {
	return append(append(make([]string, 0, len(l.Versions)+len(l.Lacked)), l.Versions...), l.Lacked...)
}

// Listed is when the module's origin was listed, and whether the
// record's schema is known.
func (l *ModuleVersionList) Listed() (time.Time, bool) { return l.ListedAt, KnownSchema(l.Schema) }

// Empty returns a new, empty ModuleVersionList.
func (*ModuleVersionList) Empty() Listing { return new(ModuleVersionList) }

// ModuleRecord is what the engine keeps of one module version.
type ModuleRecord struct {
	Schema  int    `json:"schema"`
	Module  string `json:"module"`  // HOST/NS/NAME/SYSTEM
	Version string `json:"version"` // as the origin spells it
	// Location is the origin's download location, as it gave it. It may
	// carry credentials (a pre-signed URL): it is for fetching only, and
	// shown, logged or exported only through Shown or redact.Location.
	Location string `json:"location"`
	// Direct says Location is the package URL of OpenTofu's direct
	// download answer (discovery.ModuleDownload.Direct): a URL, not
	// go-getter syntax (modsource.ParseDirect). RegistryCredentials says
	// it is fetched with the origin's own credential for its host
	// (discovery.WithRegistryCredential), which the record never holds;
	// it implies Direct (records of the release that first read the
	// direct answer have it without Direct: see PackageURL). Both absent
	// (false) in every record made otherwise, and in those of earlier
	// releases, which are read as they were.
	Direct              bool `json:"direct,omitempty"`
	RegistryCredentials bool `json:"registry_credentials,omitempty"`
	// RegistryAnswered says RegistryCredentials is the word of a download
	// answer from the registry's own host, the one its credential goes
	// to: discovery refuses any other since this field was added. A
	// record that asks for the credential without it (made by an earlier
	// release, which took such an answer from a modules.v1 service on
	// another host too) is not trusted for where the credential goes: the
	// origin is asked again (mirror/modules).
	RegistryAnswered bool `json:"registry_answered,omitempty"`
	// Kind is the source kind: git or archive.
	Kind modsource.Kind `json:"kind"`
	// Package is the location without its subdirectory.
	Package string `json:"package"`
	// Subdir is the location's //SUBDIR, "" for none.
	Subdir string `json:"subdir,omitempty"`
	// Commit is the Git commit id the package was fetched at.
	Commit string `json:"commit,omitempty"`
	// SHA256 is the sha256 of the normalized package (a tar.gz), "" until
	// it was first fetched; Size its length.
	SHA256 string `json:"sha256,omitempty"`
	Size   int64  `json:"size,omitempty"`
	// Tree is the package's modsource.PackageTree: what it holds, whatever
	// bytes its compression took. A package fetched again (after its blob
	// was evicted) or imported is the one recorded when its tree is,
	// though its sha256 may not be (the same package compressed by
	// another Go release's compressor); the record then takes the new
	// sha256. "" in a record of an earlier release, until its package is
	// next read from the cache.
	Tree      string    `json:"tree,omitempty"`
	FetchedAt time.Time `json:"fetched_at,omitzero"`
	// Provenance is how the package reached the cache: fetched from its
	// source (ProvenanceOrigin), loaded by ImportModule from an export
	// that vouched for it (ProvenanceImported), or a local module
	// imported without any origin (ProvenanceUnsigned: no Location, never
	// fetched again).
	Provenance Provenance `json:"provenance,omitempty"`
}

// PackageURL says the record's Location is a package URL, not go-getter
// syntax: Direct, or RegistryCredentials (which implies it).
func (r ModuleRecord) PackageURL() bool { return r.Direct || r.RegistryCredentials }

// Address parses the record's Location as it was given: a package URL
// (modsource.ParseDirect) when PackageURL, else a location in go-getter
// syntax (modsource.Parse).
func (r ModuleRecord) Address() (modsource.Address, error) {
	return ParseLocation(r.Location, r.PackageURL())
}

// ParseLocation parses a download location: a package URL when direct
// (discovery.ModuleDownload.Direct), else go-getter syntax.
func ParseLocation(location string, direct bool) (modsource.Address, error) {
	if direct {
		return modsource.ParseDirect(location)
	}
	return modsource.Parse(location)
}

// SetDownload makes the record's location dl's: its Location, and
// whether it is a package URL and wants the registry's credential.
func (r *ModuleRecord) SetDownload(location string, direct, registryCredentials bool) {
	r.Location, r.Direct, r.RegistryCredentials = location, direct || registryCredentials, registryCredentials
}

// SameDownload says the record's location is location, read the same way
// (a package URL or not, with the registry's credential or not).
func (r ModuleRecord) SameDownload(location string, direct, registryCredentials bool) bool {
	return r.Location == location && r.PackageURL() == (direct || registryCredentials) && r.RegistryCredentials == registryCredentials
}

// Shown is the record's package (its location without subdirectory)
// without its secrets, for logs, pages and messages.
func (r ModuleRecord) Shown() string { return redact.Location(r.Package) }

func ModuleVersionsKey(m addrs.Module) string { return ModuleVersionsKeyOf(m.String()) }

// ModuleVersionsKeyOf is ModuleVersionsKey of the module whose address is
// name (Module.String()).
func ModuleVersionsKeyOf(name string) string { return "modversions/" + name }

func ModuleRecordPrefix(m addrs.Module) string { return "module/" + m.String() + "/" }

// ModuleRecordKey keys the record of version v of m: the version in its
// canonical form (v.String(): "1.1.0" for "v1.1.0"), so that every
// spelling of one version shares it. The key is the one earlier releases
// wrote (they kept the canonical string), so a cache, a bundle or a
// shared bucket of theirs is read as it is.
func ModuleRecordKey(m addrs.Module, v versions.Version) string {
	return ModuleRecordPrefix(m) + v.String()
}

// ModuleZipRecord is what the engine keeps of a module version's zip,
// the one layer of its OCI artifact (mirror/modules.Zips).
type ModuleZipRecord struct {
	Schema  int    `json:"schema"`
	Module  string `json:"module"`  // HOST/NS/NAME/SYSTEM
	Version string `json:"version"` // as the module's record spells it
	// Package is the sha256 of the package (the tar.gz) it was made from.
	Package string `json:"package"`
	// SHA256 and Size are the zip's.
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

func ModuleZipPrefix(m addrs.Module) string { return "modzip/" + m.String() + "/" }

// ModuleZipKey keys the record of the zip of version v of m, by the
// canonical version as ModuleRecordKey does.
func ModuleZipKey(m addrs.Module, v versions.Version) string {
	return ModuleZipPrefix(m) + v.String()
}

// OriginSpelling returns how the list spells v (the origin's own
// spelling, "v1.1.0" for a client's 1.1.0: what the origin's download
// answer is asked with), false when the list does not name it. A list
// that names v in its canonical form too ("v1.1.0" and "1.1.0", a
// registry publishing from two tags) answers that form: the one
// Terraform and OpenTofu ask an origin's download in, whatever spelling
// they picked from its list.
func (l *ModuleVersionList) OriginSpelling(v versions.Version) (string, bool) {
	found, ok := "", false
	for _, raw := range l.Versions {
		if lv, err := addrs.ParseModuleVersion(raw); err == nil && lv == v {
			if raw == v.String() {
				return raw, true
			}
			if !ok {
				found, ok = raw, true
			}
		}
	}
	return found, ok
}

// ModuleVersionsServed is an origin's module version list without the
// strings that are not module versions (addrs.ParseModuleVersion), each
// reported to skip: no door serves them, and a client that read one as a
// version (hashicorp/go-version reads "1.2.0.0") would ask for it. The
// others keep the origin's spelling and order.
func ModuleVersionsServed(vs []string, skip func(raw string, err error)) []string {
	out := make([]string, 0, len(vs))
	for _, raw := range vs {
		if _, err := addrs.ParseModuleVersion(raw); err != nil {
			skip(raw, err)
			continue
		}
		out = append(out, raw)
	}
	return out
}

// SortModuleVersions sorts version strings newest first where they parse
// as semver, the others after them in their order.
func SortModuleVersions(vs []string) {
	slices.SortStableFunc(vs, func(a, b string) int {
		va, ea := addrs.ParseModuleVersion(a)
		vb, eb := addrs.ParseModuleVersion(b)
		switch {
		case ea != nil && eb != nil:
			return 0
		case ea != nil:
			return 1
		case eb != nil:
			return -1
		case va.GreaterThan(vb):
			return -1
		case vb.GreaterThan(va):
			return 1
		}
		return 0
	})
}

// ErrModuleRecordRefused matches a stored module record whose location
// or subdirectory today's rules refuse (modsource.Parse): one kept by an
// earlier release, read from the shared store or imported before a rule
// was added.
var ErrModuleRecordRefused = errors.New("stored module record refused by the rules in force")

// UnmarshalJSON decodes a module record and holds it to the rules a
// fresh one is made by: its location must parse (Address) and
// give the kind and //SUBDIR the record keeps; a record without location
// (a local module) must keep a subdirectory as modsource.CleanSubdir
// gives it. Every read of a stored record decodes it here, so that a
// rule added later applies to what was stored before it. A record that
// fails is decoded all the same (for the cache check and retention, which
// must see it) and the error is a *verify.Error (bad_archive) matching
// ErrModuleRecordRefused: whoever serves it takes it for damaged.
func (r *ModuleRecord) UnmarshalJSON(b []byte) error {
	type plain ModuleRecord // without this method
	if err := json.Unmarshal(b, (*plain)(r)); err != nil {
		return err
	}
	return r.check()
}

// check is UnmarshalJSON's rule on a decoded record.
func (r *ModuleRecord) check() error {
	if !KnownSchema(r.Schema) {
		return nil // read by no one
	}
	refuse := func(detail string) error {
		return &verify.Error{Reason: verify.ReasonBadArchive, Err: ErrModuleRecordRefused,
			Detail: fmt.Sprintf("module %s %s: %s", r.Module, r.Version, detail)}
	}
	if r.Location == "" {
		if r.Subdir != modsource.CleanSubdir(r.Subdir) {
			return refuse(fmt.Sprintf("subdirectory %q is not clean", r.Subdir))
		}
		return nil
	}
	addr, err := r.Address()
	if err != nil {
		return refuse(fmt.Sprintf("location %s: %v", redact.Location(r.Location), err))
	}
	if addr.Kind != r.Kind || addr.Subdir != r.Subdir {
		return refuse(fmt.Sprintf("location %s gives kind %s and subdirectory %q today, the record keeps %s and %q",
			redact.Location(r.Location), addr.Kind, addr.Subdir, r.Kind, r.Subdir))
	}
	return nil
}
